"""The sandbox detail page: progress, placement, access, cost, extend and terminate."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from portal.accounts.models import Membership
from portal.approvals.services import approval_decide
from portal.sandboxes.services import sandbox_request, sandbox_share
from portal.workloads.models import Approval, Workload, WorkloadState
from tests.rows import HTMX, make_sandbox


def test_a_running_slice_shows_placement_access_expiry_and_cost(
    researcher_client, researcher, fleet, slice_request, run_jobs
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox.refresh_from_db()

    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()

    assert 'class="state state-running"' in page
    assert '<li class="step step-current">Running</li>' in page
    assert '<li class="step step-skipped">Approved by policy</li>' in page
    start = sandbox.allocations.get().mig_slice.start
    assert f"gpu-h100-b · GPU 0 · 1g.10gb at slot {start}" in page
    assert sandbox.placement_reason in page
    host = f"{sandbox.namespace}.sandboxes.gpu.internal"
    assert f'href="/auth/sandbox/signin/?rd=%2Fsimulated%2F{host}%2F"' in page  # through the gate
    assert ">Open JupyterLab</a>" in page and "Simulated cluster" in page
    assert 'id="cost-so-far">$0.00<' in page
    assert "$0.98" in page  # per hour: 6.88 / 7
    assert "sandbox.request" in page and "sandbox.running" in page  # the audit trail
    assert 'hx-trigger="every 3s"' in page


def test_a_request_waiting_for_a_lead_shows_what_it_will_cost(
    researcher_client, researcher, fleet, run_jobs, django_assert_max_num_queries
):
    """4 x $6.88 an hour for 48 h: what the lead is asked to approve, at today's prices."""
    sandbox = run_jobs(
        lambda: sandbox_request(
            user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=48
        )
    )
    assert sandbox.state == WorkloadState.PENDING_APPROVAL

    with django_assert_max_num_queries(
        22
    ):  # the whole page; its cost reads one price, whether its owner is still in the team, and its
        # notices are marked read (opened)
        page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()

    assert "<dt>Cost, estimated</dt>" in page
    assert 'id="cost-so-far">$1,320.96<div class="sub" id="estimate-note">$27.52/h for its 48 h' in page
    assert "nothing is billed until it is placed" in page
    # why it waits, once (above the facts), and under Approval who it waits for
    assert page.count("more than 1 whole GPU and longer than 24 hours") == 1
    assert "Waiting for a decision." in page


def test_the_fragment_carries_the_live_part_and_the_nav_badges(
    researcher_client, researcher, team, whole_gpus
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=1)

    page = researcher_client.get(f"/sandboxes/{sandbox.number}/", **HTMX).content.decode()

    assert page.lstrip().startswith('<section id="sandbox-live"')
    assert 'id="cost-so-far">$6.88<' in page
    assert "Audit trail" not in page
    assert 'id="nav-approvals-badge"' in page


def test_a_refresh_brings_the_panels_its_state_changed(
    researcher_client, researcher, team, whole_gpus, django_assert_max_num_queries
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], hours_ago=1)
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert "?actions=extend,restart,terminate&amp;panels=1111" in page  # the page polls with its panels
    assert page.count('id="sandbox-panels"') == 1 and 'id="sandbox-kubectl"' in page

    # the page was drawn while it was starting: the refresh swaps in what running brings
    polled = f"/sandboxes/{sandbox.number}/?actions=extend,restart,terminate&panels=0110"
    with django_assert_max_num_queries(20):
        swapped = researcher_client.get(polled, **HTMX).content.decode()
    assert '<div id="sandbox-panels" hx-swap-oob="true">' in swapped
    assert 'id="sandbox-cost"' in swapped and 'id="sandbox-kubectl"' in swapped
    assert (
        '<p class="muted small" id="home-note" hx-swap-oob="true"><code>/home</code>: a scratch volume'
        in swapped
    )

    unchanged = researcher_client.get(polled.replace("0110", "1111"), **HTMX).content.decode()
    assert 'id="sandbox-panels"' not in unchanged and 'id="home-note"' not in unchanged


def test_a_queued_sandbox_shows_its_place_in_the_queue(researcher_client, researcher, team, h100):
    make_sandbox(owner=researcher, team=team, state=WorkloadState.QUEUED, gpu_type=h100, hours_ago=3)
    second = make_sandbox(
        owner=researcher,
        team=team,
        state=WorkloadState.QUEUED,
        gpu_type=h100,
        hours_ago=1,
        message="Waiting for capacity: no h100-80gb node has 8 free GPUs.",
    )

    page = researcher_client.get(f"/sandboxes/{second.number}/").content.decode()

    assert "#2 in the h100-80gb queue" in page
    assert "Waiting for capacity: no h100-80gb node has 8 free GPUs." in page


def test_a_sandbox_of_another_user_is_not_found(other_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])

    assert other_client.get(f"/sandboxes/{sandbox.number}/").status_code == 404
    assert other_client.get("/sandboxes/999999/").status_code == 404


def test_the_lead_of_the_team_may_see_a_members_sandbox(lead_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])

    response = lead_client.get(f"/sandboxes/{sandbox.number}/")
    assert response.status_code == 200
    assert f"<h1>{sandbox.name}</h1>" in response.content.decode()


def test_only_those_who_may_open_a_sandbox_are_offered_to(
    lead_client, researcher_client, researcher, lead, admin_user, admin_client, fleet, slice_request, run_jobs
):
    """A lead sees a member's sandbox but may not open it unless it is shared with them: no button
    that leads to a refusal, and no link to a home volume that is not theirs."""
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    owners = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="open-app"' in owners and "Only you get in" in owners and ">my home volume</a>" in owners
    leads = lead_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="open-app"' not in leads and ">my home volume</a>" not in leads
    assert "Only alice gets in: ask them to share it with you to open it." in leads
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=[lead.username])
    leads = lead_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="open-app"' in leads and "Shared with you by alice: you get in" in leads
    owners = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert "Only you and those you share it with get in" in owners
    # an admin it was shared with while in the team, who has left it since: the gate refuses them
    membership = Membership.objects.create(
        user=admin_user, team=sandbox.team, role=Membership.Role.RESEARCHER
    )
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=[lead.username, admin_user.username])
    membership.delete()
    admins = admin_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="open-app"' not in admins and 'id="open-app-closed"' in admins
    assert "they may read and change the files of your home volume" in owners  # said before sharing


def test_extending_within_policy_moves_the_expiry(researcher_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    before = sandbox.expires_at

    response = researcher_client.post(f"/sandboxes/{sandbox.number}/extend/", {"hours": "4"}, follow=True)

    sandbox.refresh_from_db()
    assert sandbox.expires_at - before == timedelta(hours=4)
    assert "Extended: it now expires" in response.content.decode()


def test_extending_past_the_auto_approval_line_asks_a_lead(researcher_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    before = sandbox.expires_at

    response = researcher_client.post(f"/sandboxes/{sandbox.number}/extend/", {"hours": "30"}, follow=True)

    sandbox.refresh_from_db()
    assert sandbox.expires_at == before
    assert Approval.objects.get(workload=sandbox).kind == Approval.Kind.EXTEND
    page = response.content.decode()
    assert "Sent to a lead for approval: the sandbox would live longer than 24 hours." in page


def test_a_bad_extension_shows_the_reason_and_changes_nothing(
    researcher_client, researcher, team, whole_gpus
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    before = sandbox.expires_at

    response = researcher_client.post(f"/sandboxes/{sandbox.number}/extend/", {"hours": "1000"}, follow=True)

    sandbox.refresh_from_db()
    assert sandbox.expires_at == before
    assert "team Vision allows at most 168 hours" in response.content.decode()
    assert 'name="hours" value="1000"' in response.content.decode()  # what was typed, to mend
    again = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'name="hours" value="4"' in again  # once: the next visit starts afresh
    typo = researcher_client.post(f"/sandboxes/{sandbox.number}/extend/", {"hours": "abc"}, follow=True)
    assert 'name="hours" value="abc"' in typo.content.decode()


def test_terminating_stops_billing_and_ends_the_sandbox(
    researcher_client, researcher, fleet, slice_request, run_jobs
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))

    response = run_jobs(lambda: researcher_client.post(f"/sandboxes/{sandbox.number}/terminate/"))

    sandbox.refresh_from_db()
    assert response.status_code == 302 and response["Location"] == f"/sandboxes/{sandbox.number}/"
    assert sandbox.state == WorkloadState.TERMINATED
    assert sandbox.allocations.get().ended_at is not None
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert '<li class="step step-done">Terminated</li>' in page
    assert 'hx-trigger="every 3s"' not in page
    assert f"/sandboxes/{sandbox.number}/terminate/" not in page


def test_the_fragment_hides_the_actions_once_the_sandbox_ended(researcher_client, researcher, team, h100):
    sandbox = make_sandbox(owner=researcher, team=team, state=WorkloadState.TERMINATED, gpu_type=h100)

    page = researcher_client.get(f"/sandboxes/{sandbox.number}/", **HTMX).content.decode()

    assert '<section id="sandbox-actions" hx-swap-oob="true" hidden>' in page


def test_another_user_cannot_terminate_a_sandbox(other_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])

    other_client.post(f"/sandboxes/{sandbox.number}/terminate/")

    assert Workload.objects.get(pk=sandbox.pk).state == WorkloadState.RUNNING


def test_a_rejected_request_shows_the_reason(researcher_client, researcher, team, h100):
    sandbox = make_sandbox(
        owner=researcher,
        team=team,
        state=WorkloadState.REJECTED,
        gpu_type=h100,
        message="Rejected by bob: use one GPU first",
    )

    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()

    assert '<p class="message message-bad">Rejected by bob: use one GPU first</p>' in page
    assert '<li class="step step-failed">Rejected</li>' in page


def test_a_rejected_request_says_so_once_in_its_trail_and_an_extensions_decision_stays(
    researcher_client, researcher, lead, fleet, run_jobs
):
    """The request's own approval and the workload both record a rejection: the page lists it once.
    An extension's decision has no other line, so it stays."""
    kept = run_jobs(
        lambda: sandbox_request(
            user=researcher, team="vision", name="small", gpu_type="h100-80gb", count=1, ttl_hours=2
        )
    )
    researcher_client.post(f"/sandboxes/{kept.number}/extend/", {"hours": "30"})  # past the line: a lead
    extension = Approval.objects.get(workload=kept, kind=Approval.Kind.EXTEND)
    approval_decide(user=lead, approval_id=extension.pk, approve=False, comment="not that long")
    page = researcher_client.get(f"/sandboxes/{kept.number}/").content.decode()
    assert page.count("not that long") >= 1 and "Request rejected" in page

    big = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=8
    )
    run_jobs(
        lambda: approval_decide(
            user=lead, approval_id=big.approvals.get().pk, approve=False, comment="use one"
        )
    )
    trail = (
        researcher_client.get(f"/sandboxes/{big.number}/")
        .content.decode()
        .split('id="audit-trail-events"')[1]
    )
    assert "Rejected" in trail and "Request rejected" not in trail


def test_a_request_a_lead_approved_shows_the_approval_step_done(
    researcher_client, researcher, lead, fleet, run_jobs
):
    sandbox = sandbox_request(
        user=researcher, team="vision", name="long-one", gpu_type="h100-80gb", count=1, ttl_hours=30
    )
    run_jobs(
        lambda: approval_decide(user=lead, approval_id=sandbox.approvals.get().pk, approve=True, comment="ok")
    )
    researcher_client.post(f"/sandboxes/{sandbox.number}/extend/", {"hours": "2"})  # a later extension waits

    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()

    assert '<li class="step step-done">Approved</li>' in page
    assert "Approved by policy" not in page
    assert "Extension by 2 h: <strong>pending</strong>" in page  # how long it asks for
    assert "The request itself waits" not in page


def test_an_extension_of_a_request_still_waiting_says_the_request_waits_too(
    researcher_client, researcher, lead, fleet
):
    sandbox = sandbox_request(
        user=researcher, team="vision", name="big", gpu_type="h100-80gb", count=4, ttl_hours=8
    )
    researcher_client.post(f"/sandboxes/{sandbox.number}/extend/", {"hours": "20"})
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert "Extension by 20 h: <strong>pending</strong>" in page
    assert "The request itself waits for a lead too." in page
    assert '<li class="step step-current">Pending approval</li>' in page


def test_a_degraded_sandbox_says_so_beside_running(researcher_client, researcher, team, whole_gpus):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0], name="crashy")
    Workload.objects.filter(pk=sandbox.pk).update(
        degraded_since=timezone.now(), message="Degraded: OOM-killed: the sandbox keeps using more memory"
    )
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert '<span class="state state-running">running</span>' in page
    assert 'class="state state-degraded"' in page and "Degraded: OOM-killed" in page
    dashboard = researcher_client.get("/").content.decode()
    assert 'class="state state-degraded"' in dashboard


def test_a_running_sandbox_shows_its_events_and_log_and_can_be_restarted(
    researcher_client, researcher, fleet, slice_request, run_jobs
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert f'hx-post="/sandboxes/{sandbox.number}/insight/" hx-trigger="load"' in page  # asks once shown
    assert ">Restart</button>" in page

    panel = run_jobs(lambda: researcher_client.post(f"/sandboxes/{sandbox.number}/insight/", **HTMX))
    assert panel.status_code == 200
    panel = researcher_client.get(f"/sandboxes/{sandbox.number}/insight/", **HTMX).content.decode()
    assert 'id="sandbox-events"' in panel and "Scheduled" in panel and "gpu-h100-b" in panel
    assert "[simulated cluster]" in panel and 'hx-trigger="every 2s"' not in panel  # read: no polling
    again = researcher_client.post(f"/sandboxes/{sandbox.number}/insight/", **HTMX).content.decode()
    assert "; reading again…</p>" in again  # not "…."

    response = run_jobs(lambda: researcher_client.post(f"/sandboxes/{sandbox.number}/restart/", follow=True))
    assert "Restarting: a new pod starts on the same GPUs" in response.content.decode()
    sandbox.refresh_from_db()
    assert sandbox.restarted_at is not None and sandbox.state == WorkloadState.RUNNING


def test_events_and_restart_are_for_those_who_see_the_sandbox(
    other_client, researcher_client, researcher, team, whole_gpus
):
    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    assert other_client.post(f"/sandboxes/{sandbox.number}/insight/", **HTMX).status_code == 404
    assert other_client.get(f"/sandboxes/{sandbox.number}/insight/", **HTMX).status_code == 404
    refused = other_client.post(f"/sandboxes/{sandbox.number}/restart/")
    assert refused.status_code == 404  # as in the API: nothing says it exists
    sandbox.refresh_from_db()
    assert sandbox.restart_requested_at is None  # nothing changed
    ended = make_sandbox(
        owner=researcher, team=team, state=WorkloadState.TERMINATED, gpu_type=whole_gpus[0].gpu_type
    )
    panel = researcher_client.post(f"/sandboxes/{ended.number}/insight/", **HTMX).content.decode()
    assert "only while the sandbox is starting or running" in panel


def test_the_owner_gets_a_kubeconfig_on_the_page_and_only_while_the_sandbox_runs(
    researcher_client, lead_client, researcher, fleet, slice_request, run_jobs
):
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert 'id="sandbox-kubectl"' in page and "kubectl exec -it sandbox-0 -- bash" in page
    assert 'id="sandbox-kubectl"' not in lead_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    sandbox.refresh_from_db()

    run_jobs(lambda: researcher_client.post(f"/sandboxes/{sandbox.number}/kubectl/", **HTMX))
    panel = researcher_client.get(f"/sandboxes/{sandbox.number}/kubectl/", **HTMX).content.decode()
    assert 'id="kubeconfig-download"' in panel and "simulated cluster" in panel
    download = researcher_client.get(f"/sandboxes/{sandbox.number}/kubeconfig/")
    assert download["Content-Disposition"] == f'attachment; filename="{sandbox.namespace}.kubeconfig"'
    assert b"Simulated cluster: there is no API server" in download.content

    refused = lead_client.post(f"/sandboxes/{sandbox.number}/kubectl/", **HTMX).content.decode()
    assert "kubectl access to a sandbox is its owner&#x27;s alone." in refused
    assert lead_client.get(f"/sandboxes/{sandbox.number}/kubeconfig/").status_code == 404  # not theirs

    Workload.objects.filter(pk=sandbox.pk).update(state=WorkloadState.TERMINATED)
    assert researcher_client.get(f"/sandboxes/{sandbox.number}/kubeconfig/").status_code == 404


def test_a_long_audit_trail_shows_its_latest_events_and_every_one_on_asking(
    researcher_client, researcher, team, h100
):
    from portal.audit.services import audit_record

    sandbox = make_sandbox(owner=researcher, team=team, gpu_type=h100)
    for n in range(60):
        audit_record(actor=researcher, action="sandbox.extend", obj=sandbox, detail=f"event {n}")
    url = f"/sandboxes/{sandbox.number}/"

    page = researcher_client.get(url).content.decode()
    trail = page.split('id="audit-trail-events"')[1].split("</ol>")[0]
    assert trail.count("<li>") == 50 and "event 59" in trail and "event 9<" not in trail
    assert trail.index("event 10<") < trail.index("event 59")  # oldest first
    assert 'href="?trail=all#audit-trail-events"' in trail and "The latest 50 of 60 events" in trail

    everything = researcher_client.get(url, {"trail": "all"}).content.decode()
    trail = everything.split('id="audit-trail-events"')[1].split("</ol>")[0]
    assert "event 0<" in trail and "Show every event" not in trail
    assert "All 60 events" in trail and 'href="?#audit-trail-events">Show the latest 50' in trail
    assert "&amp;trail=all" in everything  # the page's refresh keeps every event


def test_the_sharing_panel_warns_of_the_home_only_when_the_sandbox_has_it(
    researcher_client, researcher, lead, fleet, slice_request, run_jobs
):
    """Sharing lends the owner's home volume where the sandbox has it; a sandbox on a scratch /home
    (the home was held by another sandbox of theirs) lends nothing that outlives it."""
    from portal.sandboxes.models import Home

    first = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    second = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "second"}))
    assert Home.objects.get(user=researcher).attached_to_id == first.pk
    warning = "goes on with it into your later sandboxes"
    assert warning in researcher_client.get(f"/sandboxes/{first.number}/").content.decode()
    page = researcher_client.get(f"/sandboxes/{second.number}/").content.decode()
    assert "a scratch volume" in page and 'id="sandbox-sharing"' in page and warning not in page


def test_unsharing_one_is_not_refused_because_another_it_stays_shared_with_has_left_the_team(
    researcher, lead, team, fleet, slice_request, run_jobs
):
    from portal.accounts.models import Membership
    from tests.factories import MembershipFactory, UserFactory

    carol = UserFactory(username="carol")
    MembershipFactory(user=carol, team=team)
    sandbox = run_jobs(lambda: sandbox_request(user=researcher, **slice_request))
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["bob", "carol"])
    Membership.objects.filter(user=carol).delete()
    sandbox_share(user=researcher, sandbox_id=sandbox.pk, usernames=["carol"])  # bob unshared
    assert list(sandbox.shared_with.values_list("username", flat=True)) == ["carol"]


def test_opening_the_page_a_notice_points_at_reads_the_notice(
    researcher_client, researcher, team, whole_gpus
):
    from portal.accounts.models import Notification
    from portal.accounts.services import notify
    from tests.rows import HTMX, make_sandbox

    box = make_sandbox(owner=researcher, team=team, name="box", gpu=whole_gpus[0], hours_ago=1)
    notify(user=researcher, message="Sandbox box is running.", kind="running", link=box.get_absolute_url())
    notify(user=researcher, message="Something else.", kind="running", link="/spend/")
    researcher_client.get(box.get_absolute_url(), **HTMX)  # a poll is not an opening
    assert Notification.objects.filter(user=researcher, read_at__isnull=True).count() == 2
    page = researcher_client.get(box.get_absolute_url()).content.decode()
    assert list(
        Notification.objects.filter(user=researcher, read_at__isnull=True).values_list("link", flat=True)
    ) == ["/spend/"]
    assert 'title="Unread notifications">1</span>' in page  # the bell counts what is left
