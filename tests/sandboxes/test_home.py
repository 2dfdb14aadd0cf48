"""The home page and API on the simulated cluster: made by the first sandbox, its size and use,
growing it within policy, deleting it on a typed confirmation, and what a sandbox's /home is."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.utils import timezone

from portal.sandboxes.gate import sandbox_app_url
from portal.sandboxes.models import Home
from portal.sandboxes.services import sandbox_request
from portal.workloads.services import workload_terminate

pytestmark = pytest.mark.django_db


def test_someone_in_no_team_sees_the_default_size_at_its_price(admin_user):
    from tests.conftest import signed_in

    page = signed_in(admin_user).get("/home/").content.decode()
    assert "its team's default size, 50 GB unless the team sets another" in page
    assert '<strong class="money">$5.00</strong> a month' in page  # not $0.00


def test_the_home_page_before_and_after_the_first_sandbox(
    run_jobs, researcher_client, researcher, fleet, slice_request
):
    page = researcher_client.get("/home/").content.decode()
    assert (
        "You have no home yet. Your next sandbox makes one of 50 GB" in page and "$5.00" in page
    )  # 50 x 0.10

    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    page = researcher_client.get("/home/").content.decode()
    assert 'id="home-size">50 GB' in page and sandbox.name in page
    assert "simulated cluster: a simulated figure" in page  # its use, marked as such
    home = Home.objects.get(user=researcher)
    assert home.used_gb is not None and home.volume_name.startswith("pv-home-alice-")
    detail = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert "alice&#x27;s home volume (50 GB), kept when the sandbox ends" in detail

    second = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    detail = researcher_client.get(f"/sandboxes/{second.number}/").content.decode()
    assert "a scratch volume" in detail  # the home is in the first sandbox


def test_the_request_form_and_the_container_say_what_home_is(
    run_jobs, researcher_client, researcher, fleet, slice_request
):
    form = researcher_client.get("/sandboxes/new/").content.decode()
    assert "your first sandbox makes at the team&#x27;s default size" in form

    first = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "storage_gb": 300}))
    second = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    form = researcher_client.get("/sandboxes/new/").content.decode()
    assert "/home is your home volume (50 GB; grow it under My home)" in form
    detail = researcher_client.get(f"/sandboxes/{first.number}/").content.decode()
    assert "300 GB" not in detail  # its /home is the 50 GB home, not the storage asked for

    first.refresh_from_db()
    second.refresh_from_db()
    inside = researcher_client.get(sandbox_app_url(first), follow=True).content.decode()
    assert "alice&#x27;s home volume (50 GB), kept when the sandbox ends" in inside
    inside = researcher_client.get(sandbox_app_url(second), follow=True).content.decode()
    assert f"a scratch volume ({second.storage_gb} GB) that goes with the sandbox" in inside


def test_growing_and_deleting_the_home_on_the_page(
    run_jobs, researcher_client, researcher, fleet, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    response = run_jobs(lambda: researcher_client.post("/home/resize/", {"size_gb": "500"}, follow=True))
    assert "Team Vision lets a home grow to 200 GB at most." in response.content.decode()
    assert 'name="size_gb" value="500"' in response.content.decode()  # to correct, not type again
    assert 'name="size_gb" value="100"' in researcher_client.get("/home/").content.decode()  # once
    response = run_jobs(lambda: researcher_client.post("/home/resize/", {"size_gb": "120"}, follow=True))
    assert (
        "Your home grows to 120 GB: billed so from now, the volume grows now, in the sandbox that holds it."
        in response.content.decode()
    )
    assert Home.objects.get(user=researcher).size_gb == 120

    refused = researcher_client.post("/home/delete/", {"confirm": "alice"}, follow=True).content.decode()
    assert f"Sandbox {sandbox.name} uses your home: end it first." in refused
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox"))
    idle = researcher_client.post("/home/resize/", {"size_gb": "130"}, follow=True).content.decode()
    assert (
        "Your home grows to 130 GB: billed so from now, the volume grows when a sandbox next holds it."
        in idle
    )
    wrong = researcher_client.post("/home/delete/", {"confirm": "ALICE"}, follow=True).content.decode()
    assert "Type your username (alice) to confirm" in wrong
    done = run_jobs(lambda: researcher_client.post("/home/delete/", {"confirm": "alice"}, follow=True))
    assert "Your home is being deleted" in done.content.decode()
    assert Home.objects.get(user=researcher).state == Home.State.DELETED
    assert "You have no home yet" in researcher_client.get("/home/").content.decode()


def test_the_home_through_the_api(run_jobs, alice, carol, fleet, slice_body):
    assert alice.get("/api/v1/home").status_code == 404
    created = run_jobs(lambda: alice.post("/api/v1/sandboxes", slice_body, format="json")).json()
    home = alice.get("/api/v1/home").json()
    assert (home["size_gb"], home["team"], home["max_gb"], home["sandbox"]) == (
        50,
        "vision",
        200,
        created["id"],
    )
    assert (home["price_per_gb_month"], home["monthly_cost"]) == ("0.10", "5.00")  # the default price
    from portal.fleet.models import StoragePrice

    StoragePrice.objects.create(price_per_gb_month=Decimal("0.0725"), effective_from=timezone.now())
    grown = alice.patch("/api/v1/home", {"size_gb": 60}, format="json").json()
    assert (grown["size_gb"], grown["price_per_gb_month"], grown["monthly_cost"]) == (60, "0.0725", "4.35")
    shrink = alice.patch("/api/v1/home", {"size_gb": 10}, format="json")
    assert shrink.status_code == 400 and shrink.json()["error"]["fields"] == {"size_gb": ["more than 60"]}
    assert alice.delete("/api/v1/home", {"confirm": "alice"}, format="json").status_code == 409  # in use
    assert carol.get("/api/v1/home").status_code == 404  # carol has none, and never sees alice's


def test_datasets_on_the_request_form_the_detail_page_and_the_api(
    run_jobs, researcher_client, researcher, alice, team, other_team, fleet, slice_request, slice_body
):
    from portal.sandboxes.models import Dataset

    ours = Dataset.objects.create(
        slug="imagenet", name="ImageNet", kind="nfs", nfs_server="nfs", nfs_path="/i"
    )
    ours.teams.add(team)
    Dataset.objects.create(
        slug="private", name="NLP only", kind="nfs", nfs_server="nfs", nfs_path="/p"
    ).teams.add(other_team)
    form = researcher_client.get("/sandboxes/new/").content.decode()
    assert 'value="imagenet"' in form and 'value="private"' not in form  # only her teams' datasets

    data = {
        "team": "vision", "name": "with-data", "gpu_type": "h100-80gb", "gpu_mode": "mig",
        "mig_profile": "1g.10gb", "lifetime_mode": "hours", "ttl_hours": "1", "datasets": ["imagenet"],
    }  # fmt: skip
    response = run_jobs(lambda: researcher_client.post("/sandboxes/new/", data, follow=True))
    page = response.content.decode()
    assert "<code>/data/imagenet</code> (ImageNet)" in page
    from portal.sandboxes.selectors import sandbox_inside

    mine = Dataset.objects.get(slug="imagenet").sandboxes.get()
    assert ("/data/imagenet", "ImageNet: NFS export, read-only") in sandbox_inside(
        workload_id=mine.pk, username="alice"
    ).mounts
    refused = researcher_client.post("/sandboxes/new/", {**data, "name": "nope", "datasets": ["private"]})
    assert "Select a valid choice" in refused.content.decode()  # not offered to her teams at all

    created = run_jobs(
        lambda: alice.post("/api/v1/sandboxes", {**slice_body, "datasets": ["imagenet"]}, format="json")
    )
    assert created.status_code == 201 and created.json()["datasets"] == ["imagenet"]
    bad = alice.post(
        "/api/v1/sandboxes", {**slice_body, "name": "bad", "datasets": ["private"]}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {"datasets": ["not a dataset of team vision: private"]}


def test_a_home_is_billed_to_the_team_that_uses_it_and_does_not_grow_on_a_team_left(
    run_jobs, alice, researcher, researcher_client, fleet, slice_request, team, other_team
):
    from portal.accounts.models import Membership
    from portal.audit.models import AuditEvent
    from portal.fleet.models import StorageHold

    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=first.pk, kind="sandbox"))
    Membership.objects.filter(user=researcher, team=team).delete()
    Membership.objects.create(user=researcher, team=other_team, role=Membership.Role.RESEARCHER)

    refused = alice.patch("/api/v1/home", {"size_gb": 200}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"].startswith(
        "Your home is billed to team Vision, which you are no longer in:"
    )
    assert Home.objects.get(user=researcher).size_gb == 50  # nothing changed
    assert list(StorageHold.objects.filter(ended_at__isnull=True).values_list("team__slug", "size_gb")) == [
        ("vision", 50)
    ]
    page = researcher_client.get("/home/").content.decode()
    assert 'id="home-left-team"' in page and 'action="/home/resize/"' not in page

    run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "team": "nlp", "name": "in-nlp"}))
    home = Home.objects.get(user=researcher)
    assert home.team == other_team and home.attached_to.name == "in-nlp"
    holds = StorageHold.objects.order_by("pk").values_list("team__slug", "size_gb", "ended_at")
    assert [(slug, size, ended is None) for slug, size, ended in holds] == [
        ("vision", 50, False),
        ("nlp", 50, True),
    ]
    assert set(
        AuditEvent.objects.filter(action="home.team_changed").values_list("team__slug", flat=True)
    ) == {"vision", "nlp"}
    page = researcher_client.get("/home/").content.decode()
    assert 'id="home-left-team"' not in page and "billed to team NLP" in page
    grown = alice.patch("/api/v1/home", {"size_gb": 60}, format="json")
    assert grown.status_code == 200 and grown.json()["team"] == "nlp"


def test_work_asked_for_before_its_owner_left_does_not_take_the_home_billing_there(
    run_jobs, researcher, fleet, slice_request, team, other_team
):
    from portal.accounts.models import Membership
    from portal.sandboxes.services.home import home_claim
    from portal.workloads.models import WorkloadState
    from tests.rows import make_sandbox

    Membership.objects.create(user=researcher, team=other_team, role=Membership.Role.RESEARCHER)
    first = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "team": "nlp"}))
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=first.pk, kind="sandbox"))
    late = make_sandbox(
        owner=researcher,
        team=team,
        state=WorkloadState.PROVISIONING,
        cluster=first.cluster,
        gpu_type=first.gpu_type,
    )  # asked for in Vision while a member; placed only now
    Membership.objects.filter(user=researcher, team=team).delete()
    assert home_claim(workload=late) is not None  # it still mounts the home
    assert Home.objects.get(user=researcher).team == other_team  # billed where its owner still is
