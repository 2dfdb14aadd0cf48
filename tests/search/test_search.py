"""Global search: the page and `GET /api/v1/search` find workloads the user may see (by name,
number or project), their teammates and catalog models, a bounded number of each, in a bounded number
of queries; another team's workloads never appear; short and long queries are refused."""

from __future__ import annotations

import pytest

from portal.catalog.demo import catalog_seed
from portal.search.selectors import GROUP_LIMIT, MAX_QUERY
from portal.workloads.models import WorkloadState
from tests.factories import MembershipFactory, UserFactory
from tests.rows import HTMX, make_deployment, make_sandbox

pytestmark = pytest.mark.django_db
API = "/api/v1/search"


@pytest.fixture
def workloads(researcher, lead, other_researcher, team, other_team, h100):
    catalog_seed()
    return {
        "mine": make_sandbox(
            owner=researcher, team=team, name="llama-tune", gpu_type=h100, project="chat-eval"
        ),
        "leads": make_sandbox(owner=lead, team=team, name="llama-lead", gpu_type=h100),
        "deployment": make_deployment(
            owner=researcher, team=team, gpu_type=h100, name="llama-serve", state=WorkloadState.QUEUED
        ),
        "theirs": make_sandbox(owner=other_researcher, team=other_team, name="llama-secret", gpu_type=h100),
    }


def names(body: dict, group: str, key: str = "name") -> set[str]:
    return {row[key] for row in body[group]["rows"]}


def test_a_researcher_finds_their_own_workloads_never_another_teams(alice, workloads):
    body = alice.get(API, {"q": "llama"}).json()

    assert names(body, "workloads") == {"llama-tune", "llama-serve"}
    assert "llama-secret" not in str(body)
    assert "llama-lead" not in str(body)  # a teammate's workload is the lead's to see, not a researcher's


def test_a_lead_finds_the_teams_workloads_and_an_admin_everyones(bob, admin, workloads):
    assert names(bob.get(API, {"q": "llama"}).json(), "workloads") == {
        "llama-tune",
        "llama-lead",
        "llama-serve",
    }
    assert "llama-secret" in names(admin.get(API, {"q": "llama"}).json(), "workloads")


def test_workloads_are_found_by_number_and_by_project_with_their_page(alice, workloads):
    deployment, sandbox = workloads["deployment"], workloads["mine"]
    assert deployment.number == sandbox.number == 1  # each kind counts on its own
    by_number = alice.get(API, {"q": "#1"}).json()["workloads"]["rows"]
    assert {(row["id"], row["kind"], row["url"]) for row in by_number} == {
        (1, "deployment", "/deployments/1/"),
        (1, "sandbox", "/sandboxes/1/"),
    }
    by_project = alice.get(API, {"q": "chat-ev"}).json()["workloads"]["rows"]
    assert [row["name"] for row in by_project] == ["llama-tune"]


def test_another_teams_workload_is_not_found_by_its_number(alice, workloads):
    theirs = workloads["theirs"]
    body = alice.get(API, {"q": str(theirs.number)}).json()

    assert "llama-secret" not in names(body, "workloads")


def test_people_are_teammates_for_members_and_everyone_for_admins(alice, admin, workloads):
    assert names(alice.get(API, {"q": "bob"}).json(), "users", "username") == {"bob"}
    assert names(alice.get(API, {"q": "carol"}).json(), "users", "username") == set()  # another team
    assert names(admin.get(API, {"q": "carol"}).json(), "users", "username") == {"carol"}


def test_catalog_models_are_found_by_name_and_source(alice, workloads):
    body = alice.get(API, {"q": "Llama-3.1-8B"}).json()

    rows = body["models"]["rows"]
    assert "llama-3.1-8b-instruct" in {row["slug"] for row in rows}
    assert any(row["url"] == "/catalog/llama-3.1-8b-instruct/" for row in rows)


def test_each_word_of_a_query_may_match_a_field_of_its_own(alice, researcher, workloads):
    models = alice.get(API, {"q": "llama 8b"}).json()["models"]["rows"]
    assert {row["slug"] for row in models} == {"llama-3.1-8b-instruct"}  # not the 70B: no "8b"
    # a workload's name and project, a person's two names
    assert names(alice.get(API, {"q": "tune chat-eval"}).json(), "workloads") == {"llama-tune"}
    assert names(alice.get(API, {"q": "serve chat-eval"}).json(), "workloads") == set()
    researcher.last_name = "Researcher"
    researcher.save(update_fields=["last_name"])
    assert names(alice.get(API, {"q": "ALICE researcher"}).json(), "users", "username") == {"alice"}
    # the catalog page's filter reads the same way
    listed = alice.get("/api/v1/catalog/models", {"q": "instruct 8b"}).json()
    assert [row["slug"] for row in listed["results"]] == ["llama-3.1-8b-instruct"]


@pytest.mark.parametrize("query", ["", "x", " y ", "#", "z" * (MAX_QUERY + 1)])
def test_queries_too_short_or_too_long_are_refused_in_the_error_shape(alice, query):
    response = alice.get(API, {"q": query})

    assert response.status_code == 400
    assert "q" in response.json()["error"]["fields"]


def test_each_group_is_bounded_and_says_there_are_more(alice, researcher, team, h100):
    for index in range(GROUP_LIMIT + 3):
        make_sandbox(owner=researcher, team=team, name=f"sweep-{index}", gpu_type=h100)

    group = alice.get(API, {"q": "sweep"}).json()["workloads"]

    assert len(group["rows"]) == GROUP_LIMIT
    assert group["more"] is True


def test_the_search_reads_the_same_number_of_queries_for_more_rows(
    researcher_client, researcher, team, h100, django_assert_max_num_queries
):
    catalog_seed()
    for index in range(GROUP_LIMIT + 3):
        make_sandbox(owner=researcher, team=team, name=f"sweep-{index}", gpu_type=h100)
        MembershipFactory(user=UserFactory(username=f"sweeper{index}"), team=team)

    with django_assert_max_num_queries(12):
        response = researcher_client.get("/search/", {"q": "swe"})
    assert response.status_code == 200


# The page.


def test_the_page_groups_results_with_links(researcher_client, workloads):
    page = researcher_client.get("/search/", {"q": "llama"}).content.decode()

    mine, deployment = workloads["mine"], workloads["deployment"]
    assert f'href="/sandboxes/{mine.number}/"' in page
    assert f'href="/deployments/{deployment.number}/"' in page
    assert 'id="search-models"' in page and 'href="/catalog/llama-3.1-8b-instruct/"' in page
    assert "llama-secret" not in page


def test_the_page_answers_htmx_with_the_results_alone(researcher_client, workloads):
    page = researcher_client.get("/search/", {"q": "llama"}, **HTMX).content.decode()

    assert page.lstrip().startswith('<section id="search-results"')


def test_the_page_handles_empty_short_and_unmatched_queries(researcher_client, workloads):
    empty = researcher_client.get("/search/").content.decode()
    assert "Type at least 2 characters" in empty

    short = researcher_client.get("/search/", {"q": "l"})
    assert short.status_code == 200
    assert 'id="search-error"' in short.content.decode()

    nothing = researcher_client.get("/search/", {"q": "no-such-thing"}).content.decode()
    assert "Nothing matches" in nothing


def test_the_nav_carries_the_search_box(researcher_client, workloads):
    page = researcher_client.get("/catalog/").content.decode()

    assert 'action="/search/"' in page and 'name="q"' in page


def test_the_search_needs_a_sign_in(client):
    assert client.get("/search/", {"q": "llama"}).status_code == 302


def test_more_than_the_page_shows_links_to_the_lists_which_find_the_same(
    researcher_client, researcher, team, h100
):
    """The lists' search box matches as global search does (each word in the name or project,
    or the number), so the page's links to them show every match, not the newest ten."""
    sweeps = [
        make_sandbox(owner=researcher, team=team, name=f"run-{index}", project="sweep-lr", gpu_type=h100)
        for index in range(GROUP_LIMIT + 3)
    ]
    make_sandbox(owner=researcher, team=team, name="other", gpu_type=h100)

    page = researcher_client.get("/search/", {"q": "sweep lr"}).content.decode()
    assert 'id="search-workloads-more"' in page
    assert 'href="/?q=sweep%20lr"' in page and 'href="/deployments/?q=sweep%20lr"' in page

    listed = researcher_client.get("/", {"q": "sweep lr", "page_size": 50}).content.decode()
    assert all(f"/sandboxes/{sandbox.number}/" in listed for sandbox in sweeps[-10:])
    assert ">other<" not in listed
    by_number = researcher_client.get("/", {"q": f"#{sweeps[0].number}"}).content.decode()
    assert f'href="/sandboxes/{sweeps[0].number}/"' in by_number and ">run-1<" not in by_number
