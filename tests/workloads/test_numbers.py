"""Sandboxes and deployments are numbered within their kind (sandbox 1, 2, 3 ... and deployment
1, 2, 3 ...): the number is what their pages, the API's `id` and their links say; the primary key
stays internal. Numbers never repeat, even when requests arrive at once."""

from __future__ import annotations

import importlib
import threading

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from portal.accounts.models import Notification
from portal.audit.services import audit_record
from portal.catalog.demo import catalog_seed
from portal.workloads.models import Workload, WorkloadCounter, WorkloadKind, next_workload_number
from tests.rows import make_deployment, make_sandbox

pytestmark = pytest.mark.django_db
ON_POSTGRES = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
BACKFILL = importlib.import_module("portal.workloads.migrations.0011_workload_numbers")


@pytest.fixture
def deployment_first(researcher, team, h100):
    """A deployment made before a sandbox: their primary keys differ from their numbers."""
    catalog_seed()
    deployment = make_deployment(owner=researcher, team=team, gpu_type=h100, name="llama")
    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100, name="notebook")
    assert sandbox.pk != sandbox.number
    return {"deployment": deployment, "sandbox": sandbox}


def test_each_kind_counts_from_one_on_its_own(researcher, team, h100):
    catalog_seed()
    first_box = make_sandbox(owner=researcher, team=team, gpu_type=h100)
    first_deployment = make_deployment(owner=researcher, team=team, gpu_type=h100)
    second_box = make_sandbox(owner=researcher, team=team, gpu_type=h100)
    second_deployment = make_deployment(owner=researcher, team=team, gpu_type=h100)

    assert (first_box.number, second_box.number) == (1, 2)
    assert (first_deployment.number, second_deployment.number) == (1, 2)
    assert first_box.get_absolute_url() == "/sandboxes/1/"
    assert second_deployment.get_absolute_url() == "/deployments/2/"
    assert dict(WorkloadCounter.objects.values_list("kind", "last")) == {"sandbox": 2, "deployment": 2}


def test_two_creations_in_a_row_get_consecutive_numbers(researcher, team, h100):
    first = make_sandbox(owner=researcher, team=team, gpu_type=h100)
    second = make_sandbox(owner=researcher, team=team, gpu_type=h100)
    assert second.number == first.number + 1
    assert Workload.objects.get(pk=second.pk).number == second.number


def test_a_creation_that_fails_gives_its_number_back(researcher, team, h100):
    make_sandbox(owner=researcher, team=team, gpu_type=h100, name="twin")
    duplicate = Workload(name="twin", kind=WorkloadKind.SANDBOX, team=team, owner=researcher, gpu_type=h100)
    duplicate.state = "running"
    with pytest.raises(IntegrityError):  # a live sandbox of that name already exists
        duplicate.save()
    assert duplicate.number is None
    assert make_sandbox(owner=researcher, team=team, gpu_type=h100).number == 2


def test_a_missing_counter_starts_after_the_highest_number(researcher, team, h100):
    make_sandbox(owner=researcher, team=team, gpu_type=h100, number=41)
    WorkloadCounter.objects.all().delete()
    assert make_sandbox(owner=researcher, team=team, gpu_type=h100).number == 42
    with transaction.atomic():
        assert next_workload_number(WorkloadKind.DEPLOYMENT) == 1


def test_a_sandbox_page_goes_by_its_number_and_another_kinds_number_is_a_404(
    deployment_first, researcher_client
):
    sandbox = deployment_first["sandbox"]
    assert researcher_client.get("/sandboxes/1/").status_code == 200
    assert "notebook" in researcher_client.get("/sandboxes/1/").content.decode()
    assert researcher_client.get(f"/sandboxes/{sandbox.pk}/").status_code == 404  # no sandbox 2
    assert researcher_client.get("/deployments/1/").status_code == 200
    assert researcher_client.get("/deployments/2/").status_code == 404
    ended = researcher_client.post("/sandboxes/2/terminate/")
    assert ended.status_code == 404


def test_the_api_id_is_the_number_within_the_kind(deployment_first, alice):
    sandbox = deployment_first["sandbox"]
    body = alice.get("/api/v1/sandboxes/1").json()
    assert (body["id"], body["name"]) == (1, "notebook")
    assert [row["id"] for row in alice.get("/api/v1/sandboxes").json()["results"]] == [1]
    assert alice.get("/api/v1/deployments/1").json()["name"] == "llama"
    assert alice.get(f"/api/v1/sandboxes/{sandbox.pk}").status_code == 404  # a deployment's key
    assert alice.get("/api/v1/deployments/2").status_code == 404
    assert alice.post(f"/api/v1/sandboxes/{sandbox.pk}/terminate").status_code == 404


def test_a_number_another_team_has_is_a_404_in_the_api_and_on_the_web(deployment_first, carol, other_client):
    assert carol.get("/api/v1/sandboxes/1").status_code == 404
    assert carol.get("/api/v1/sandboxes/1/cost").status_code == 404
    assert other_client.get("/sandboxes/1/").status_code == 404


def test_the_audit_log_links_an_event_to_the_page_by_number(deployment_first, lead, lead_client):
    sandbox = deployment_first["sandbox"]
    audit_record(actor=lead, action="sandbox.terminate", obj=sandbox, team=sandbox.team)
    html = lead_client.get("/audit/").content.decode()
    assert 'href="/sandboxes/1/"' in html
    assert f'href="/sandboxes/{sandbox.pk}/"' not in html


def test_the_audit_log_filters_a_sandbox_by_the_number_people_see(deployment_first, lead, lead_client):
    sandbox, deployment = deployment_first["sandbox"], deployment_first["deployment"]
    audit_record(actor=lead, action="sandbox.terminate", obj=sandbox, team=sandbox.team)
    audit_record(actor=lead, action="deployment.scale", obj=deployment, team=deployment.team)
    found = lead_client.get("/api/v1/audit-events", {"object_type": "sandbox", "object_id": "1"}).json()[
        "results"
    ]
    assert [e["action"] for e in found] == ["sandbox.terminate"]
    found = lead_client.get("/api/v1/audit-events", {"object_type": "deployment", "object_id": "#1"}).json()[
        "results"
    ]
    assert [e["action"] for e in found] == ["deployment.scale"]
    assert not lead_client.get("/api/v1/audit-events", {"object_type": "sandbox", "object_id": "7"}).json()[
        "results"
    ]
    html = lead_client.get("/audit/", {"object_type": "sandbox", "object_id": "1"}).content.decode()
    assert "sandbox.terminate" in html and "deployment.scale" not in html


def test_the_backfill_numbers_each_kind_in_id_order_and_relinks_notifications(researcher, team, h100):
    catalog_seed()
    rows = [
        make_sandbox(owner=researcher, team=team, gpu_type=h100),
        make_deployment(owner=researcher, team=team, gpu_type=h100),
        make_sandbox(owner=researcher, team=team, gpu_type=h100),
    ]
    for offset, row in enumerate(rows):  # numbers as nobody would give them
        Workload.objects.filter(pk=row.pk).update(number=100 - offset)
    WorkloadCounter.objects.all().delete()
    second_box = rows[2]
    note = Notification.objects.create(user=researcher, message="m", link=f"/sandboxes/{second_box.pk}/")
    wrong_kind = Notification.objects.create(
        user=researcher, message="m", link=f"/deployments/{second_box.pk}/"
    )
    elsewhere = Notification.objects.create(user=researcher, message="m", link="/approvals/#approval-3")

    numbers = BACKFILL.number_workloads(Workload, WorkloadCounter)
    BACKFILL.relink_notifications(Notification, Workload, numbers)

    assert [Workload.objects.get(pk=row.pk).number for row in rows] == [1, 1, 2]
    assert dict(WorkloadCounter.objects.values_list("kind", "last")) == {"sandbox": 2, "deployment": 1}
    note.refresh_from_db(), wrong_kind.refresh_from_db(), elsewhere.refresh_from_db()
    assert note.link == "/sandboxes/2/"
    assert wrong_kind.link == f"/deployments/{second_box.pk}/"  # not that deployment's page
    assert elsewhere.link == "/approvals/#approval-3"
    assert make_sandbox(owner=researcher, team=team, gpu_type=h100).number == 3


@pytest.mark.skipif(not ON_POSTGRES, reason="row locks across connections need PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_simultaneous_creations_never_share_a_number(researcher, team, h100):
    workers = 12
    barrier = threading.Barrier(workers)
    numbers: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def create(index: int) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                number = make_sandbox(owner=researcher, team=team, gpu_type=h100, name=f"race-{index}").number
            with lock:
                numbers.append(number)
        except Exception as error:  # reported in the assertion below
            with lock:
                errors.append(repr(error))
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(numbers) == list(range(1, workers + 1))
