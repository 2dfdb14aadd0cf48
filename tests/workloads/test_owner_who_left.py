"""An owner who has left the team may still end their work there, but no longer spend the team's
money on it (extend, keep, restart, scale up); a lead of the team still may."""

from __future__ import annotations

import pytest

from portal.accounts.models import Membership
from portal.catalog.demo import catalog_seed
from portal.core.errors import NotAllowed
from portal.deployments.services import deployment_request, deployment_scale
from portal.sandboxes.services import sandbox_request, sandbox_restart, sandbox_share
from portal.workloads.models import Workload, WorkloadKind, WorkloadState
from portal.workloads.services import workload_extend, workload_keep, workload_terminate
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
LEFT = "You are no longer a member of team Vision"


def test_an_owner_who_left_the_team_may_end_their_sandbox_but_not_spend_on_it(
    run_jobs, fleet, researcher, lead, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    expires = Workload.objects.get(pk=sandbox.pk).expires_at
    Membership.objects.filter(user=researcher, team=sandbox.team).delete()
    for act in (
        lambda: workload_extend(user=researcher, workload_id=sandbox.pk, hours=1, kind=WorkloadKind.SANDBOX),
        lambda: workload_keep(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX),
        lambda: sandbox_restart(user=researcher, sandbox_id=sandbox.pk),
    ):
        with pytest.raises(NotAllowed, match=LEFT):
            act()
    assert Workload.objects.get(pk=sandbox.pk).expires_at == expires  # nothing changed
    workload_extend(user=lead, workload_id=sandbox.pk, hours=1, kind=WorkloadKind.SANDBOX)
    assert Workload.objects.get(pk=sandbox.pk).expires_at > expires  # the lead still may
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind=WorkloadKind.SANDBOX))
    assert Workload.objects.get(pk=sandbox.pk).state == WorkloadState.TERMINATED


def test_an_owner_who_left_may_scale_their_deployment_down_but_not_up(
    run_jobs, fleet, researcher, lead, researcher_client
):
    catalog_seed()
    deployment = run_jobs(
        lambda: deployment_request(
            user=researcher, team="vision", name="llama8b", model="llama-3.1-8b-instruct",
            gpu_type="h100-80gb", count=1, replicas=1,
        )
    )  # fmt: skip
    assert Workload.objects.get(pk=deployment.pk).state == WorkloadState.RUNNING
    page = researcher_client.get(f"/deployments/{deployment.number}/").content.decode()
    assert 'id="owner-left-team"' not in page and 'id="extend-form"' in page
    assert "Scaling up and extending apply at once" in page
    Membership.objects.filter(user=researcher, team=deployment.team).delete()
    page = researcher_client.get(f"/deployments/{deployment.number}/").content.decode()
    assert (
        f"{LEFT}, which pays for it: you may scale it down or end it; a lead of the team may scale it up "
        "or extend it." in page
    )
    assert 'id="extend-form"' not in page and "Scaling up and extending apply" not in page
    with pytest.raises(NotAllowed, match=LEFT):
        deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=2)
    run_jobs(lambda: deployment_scale(user=researcher, deployment_id=deployment.pk, replicas=0))
    assert Workload.objects.get(pk=deployment.pk).replicas == 0


def test_through_the_api_the_refusal_is_a_403_that_says_why(
    run_jobs, fleet, researcher, alice, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    Membership.objects.filter(user=researcher).delete()
    answer = alice.post(f"/api/v1/sandboxes/{sandbox.number}/extend", {"hours": 1}, format="json")
    assert answer.status_code == 403
    assert answer.json()["error"]["message"] == (
        "You are no longer a member of team Vision, which pays for it: a lead of the team may extend it, "
        "and you may still end it."
    )


def test_an_owner_who_left_is_not_offered_what_only_spends(
    run_jobs, fleet, researcher, alice, researcher_client, slice_request
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    before = alice.get(f"/api/v1/sandboxes/{sandbox.number}").json()["allowed_actions"]
    assert {"extend", "restart", "terminate"} <= set(before)
    Membership.objects.filter(user=researcher).delete()
    after = alice.get(f"/api/v1/sandboxes/{sandbox.number}").json()["allowed_actions"]
    assert "terminate" in after and not {"extend", "restart"} & set(after)
    listed = alice.get("/api/v1/sandboxes").json()["results"][0]["allowed_actions"]
    assert listed == after
    extend = f'action="/sandboxes/{sandbox.number}/extend/"'
    Membership.objects.create(user=researcher, team=sandbox.team, role=Membership.Role.RESEARCHER)
    assert (
        extend in researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    )  # a member's page
    Membership.objects.filter(user=researcher).delete()
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert ">Terminate<" in page and extend not in page and ">Restart<" not in page


def test_an_owner_who_left_loses_the_ways_into_their_sandbox_and_the_page_says_so(
    run_jobs, fleet, researcher, lead, alice, researcher_client, slice_request
):
    """The gate, ssh and kubectl are for the team's members: the page offers none of them to an
    owner who left, nor sharing with more people; they may still stop sharing it and end it."""
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["bob"])
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="open-app"' in page and 'id="sandbox-kubectl"' in page and 'id="owner-left-team"' not in page
    Membership.objects.filter(user=researcher).delete()
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="owner-left-team"' in page and "no longer a member of team Vision" in page
    assert 'id="open-app"' not in page and 'id="sandbox-kubectl"' not in page
    # the sharing panel stays, to stop sharing: the one it is shared with is its only choice
    sharing = page.split('id="sandbox-sharing"')[1].split("</section>")[0]
    assert 'id="sharing-owner-left"' in sharing and "not share it with more people" in sharing
    assert 'value="bob" checked' in sharing and 'value="carol"' not in sharing
    with pytest.raises(NotAllowed, match="not share it with more people"):
        sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["bob", "carol"])
    answer = alice.post(f"/api/v1/sandboxes/{sandbox.number}/kubeconfig")
    assert (
        answer.status_code == 403
        and "kubectl access to a sandbox is for members of its team" in answer.json()["error"]["message"]
    )
    assert "Extensions within the team's policy" not in page  # no Extend to explain
    dashboard = researcher_client.get("/").content.decode()
    assert "You are no longer a member of any team: what you requested in teams you were in" in dashboard
    # unsharing still works, from the page; nobody gets in then, the owner neither
    done = researcher_client.post(f"/sandboxes/{sandbox.number}/share/", {}, follow=True).content.decode()
    assert "Shared with nobody.<" in done and "only you can open it" not in done
    assert not sandbox.shared_with.exists()


def test_the_leads_hear_of_live_work_left_by_someone_who_leaves_the_team(
    run_jobs, fleet, researcher, lead, slice_request, django_capture_on_commit_callbacks
):
    from portal.accounts.models import Notification

    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    with django_capture_on_commit_callbacks(execute=True):
        Membership.objects.filter(user=researcher, team=first.team).delete()
    (note,) = Notification.objects.filter(user=lead, message__contains="no longer in team")
    assert note.message == (
        "alice is no longer in team Vision, and 2 sandboxes of theirs run or wait on the team's budget "
        "(mig-small, second). They can no longer get into them, extend or keep them: keep or end them. "
        "Their home (50 GB, $5.00 a month) stays billed to the team until they delete it or a sandbox "
        "of theirs in another team takes it."
    )
    assert note.link == first.get_absolute_url()
    assert not Notification.objects.filter(user=researcher, message__contains="no longer in team").exists()

    # removed and added back in the same transaction (a role change done as both): nothing to say
    Membership.objects.create(user=researcher, team=first.team, role=Membership.Role.RESEARCHER)
    with django_capture_on_commit_callbacks(execute=True):
        Membership.objects.filter(user=researcher, team=first.team).delete()
        Membership.objects.create(user=researcher, team=first.team, role=Membership.Role.LEAD)
    assert Notification.objects.filter(user=lead, message__contains="no longer in team").count() == 1

    # the membership given to someone else (the admin's team page edits the row): alice has left
    membership = Membership.objects.get(user=researcher, team=first.team)
    membership.role = Membership.Role.RESEARCHER
    with django_capture_on_commit_callbacks(execute=True):
        membership.save()  # a role change alone says nothing
    assert Notification.objects.filter(user=lead, message__contains="no longer in team").count() == 1
    membership.user = UserFactory(username="dora")
    with django_capture_on_commit_callbacks(execute=True):
        membership.save()
    assert (
        Notification.objects.filter(user=lead, message__startswith="alice is no longer in team").count() == 2
    )


def test_a_leaving_lead_alone_in_it_is_told_of_to_the_admins_and_an_admin_leaving_to_nobody(
    run_jobs, fleet, researcher, lead, admin_user, slice_request, django_capture_on_commit_callbacks
):
    from portal.accounts.models import Notification
    from portal.workloads.services.leavers import leaver_workloads_told

    run_jobs(lambda: sandbox_request(user=lead, **slice_request))
    with django_capture_on_commit_callbacks(execute=True):
        Membership.objects.filter(user=lead).delete()  # the team's only lead
    assert Notification.objects.filter(
        user=admin_user, message__startswith="bob is no longer in team"
    ).exists()
    assert not Notification.objects.filter(user=researcher).exists()  # researchers are not told
    admin_user.is_staff = True
    admin_user.save()
    Membership.objects.create(user=admin_user, team=Workload.objects.first().team)
    run_jobs(lambda: sandbox_request(user=admin_user, **{**slice_request, "name": "admins"}))
    Membership.objects.filter(user=admin_user).delete()
    assert leaver_workloads_told(user_id=admin_user.pk, team_id=Workload.objects.first().team_id) == 0


def test_the_leads_hear_of_a_home_left_billed_to_the_team_and_of_no_other_teams_home(
    run_jobs, fleet, researcher, lead, slice_request, django_capture_on_commit_callbacks
):
    from portal.accounts.models import Notification, Team

    box = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))  # makes alice's home
    run_jobs(lambda: workload_terminate(user=researcher, workload_id=box.pk, kind=WorkloadKind.SANDBOX))
    with django_capture_on_commit_callbacks(execute=True):
        Membership.objects.filter(user=researcher, team=box.team).delete()
    (note,) = Notification.objects.filter(user=lead, message__contains="no longer in team")
    assert note.message == (
        "alice is no longer in team Vision, and their home (50 GB, $5.00 a month) stays billed to the "
        "team until they delete it or a sandbox of theirs in another team takes it."
    )
    assert note.link == "/spend/?team=vision&group_by=user"

    # a home billed to another team is not this team's business: nothing left here, nothing said
    other = Team.objects.create(slug="nlp", name="NLP")
    Membership.objects.create(user=researcher, team=box.team, role=Membership.Role.RESEARCHER)
    from portal.fleet.models import StorageHold

    StorageHold.objects.filter(user=researcher).update(team=other)
    with django_capture_on_commit_callbacks(execute=True):
        Membership.objects.filter(user=researcher, team=box.team).delete()
    assert Notification.objects.filter(user=lead, message__contains="no longer in team").count() == 1
