"""The request form, its live estimate and the MIG profile swap."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from portal.workloads.models import Workload, WorkloadState
from tests.conftest import field_html
from tests.factories import GpuTypeFactory
from tests.rows import HTMX, make_sandbox

SLICE = {
    "team": "vision",
    "name": "mig-small",
    "image": "",
    "gpu_type": "h100-80gb",
    "gpu_mode": "mig",
    "mig_profile": "1g.10gb",
    "lifetime_mode": "hours",
    "ttl_hours": "1",
}


def test_the_form_offers_my_teams_only_and_states_the_quota_rule(researcher_client, fleet, other_team):
    page = researcher_client.get("/sandboxes/new/").content.decode()

    assert '<option value="vision"' in page
    assert '<option value="nlp"' not in page
    assert "a MIG slice its compute slices / 7 (a 1g.10gb is 1/7)" in page
    assert "NVIDIA H100 80GB · $6.88/GPU-hour" in page


def test_a_valid_slice_request_is_created_and_redirects_to_its_page(
    researcher_client, researcher, fleet, run_jobs
):
    response = run_jobs(lambda: researcher_client.post("/sandboxes/new/", SLICE))

    sandbox = Workload.objects.get(owner=researcher, name="mig-small")
    assert response.status_code == 302
    assert response["Location"] == f"/sandboxes/{sandbox.number}/"
    assert sandbox.mig_profile == "1g.10gb"
    assert sandbox.state == WorkloadState.RUNNING


def test_errors_from_the_service_show_next_to_their_fields_and_nothing_is_created(researcher_client, fleet):
    data = {**SLICE, "name": "Not A Name!", "ttl_hours": "500"}

    response = researcher_client.post("/sandboxes/new/", data)
    page = response.content.decode()

    assert response.status_code == 200
    assert "lowercase letters, digits and hyphens" in field_html(page, "name")
    assert "allows at most 168 hours per sandbox" in field_html(page, "ttl_hours")
    assert "field-error" not in field_html(page, "gpu_type")
    assert not Workload.objects.exists()


def test_too_many_whole_gpus_is_an_error_on_the_count_field(researcher_client, fleet):
    data = {**SLICE, "gpu_mode": "whole", "count": "9", "mig_profile": ""}

    page = researcher_client.post("/sandboxes/new/", data).content.decode()

    assert "At most 8 h100-80gb GPUs fit on one node." in field_html(page, "count")
    assert not Workload.objects.exists()


def test_an_expiry_in_the_past_is_an_error_on_the_expiry_field(researcher_client, fleet):
    past = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    data = {**SLICE, "lifetime_mode": "until", "expires_at": past, "ttl_hours": ""}

    page = researcher_client.post("/sandboxes/new/", data).content.decode()

    assert "Must be at least one minute from now." in field_html(page, "expires_at")
    assert not Workload.objects.exists()


def test_a_request_over_quota_says_how_much_is_left(researcher_client, fleet, team):
    team.quota_gpus = Decimal(1)
    team.save(update_fields=["quota_gpus"])
    data = {**SLICE, "gpu_mode": "whole", "count": "2", "mig_profile": ""}

    page = researcher_client.post("/sandboxes/new/", data).content.decode()

    assert "Team Vision has 1 of 1 GPU equivalents left; this request needs 2." in page
    assert not Workload.objects.exists()


def test_the_estimate_shows_price_quota_approval_and_capacity(researcher_client, fleet):
    response = researcher_client.get("/sandboxes/estimate/", {**SLICE, "ttl_hours": "8"}, **HTMX)
    page = response.content.decode()

    assert 'id="estimate-hourly">$0.98<' in page  # 6.88 / 7
    assert 'id="estimate-total">$7.86<' in page  # 6.88 / 7 x 8 h
    assert "uses 0.14 of the 16 GPU equivalents left" in page
    assert "Approved at once" in page
    assert "Capacity free now" in page
    assert not Workload.objects.exists()


def test_the_estimate_says_why_a_lead_must_approve(researcher_client, fleet):
    data = {**SLICE, "gpu_mode": "whole", "count": "2", "mig_profile": "", "ttl_hours": "48"}

    page = researcher_client.get("/sandboxes/estimate/", data, **HTMX).content.decode()

    assert 'id="estimate-total">$660.48<' in page
    assert "Needs a lead&#x27;s approval: more than 1 whole GPU and longer than 24 hours." in page


def test_the_estimate_of_a_request_over_quota_says_it_will_be_refused(researcher_client, fleet, team):
    """Over the quota a request is refused, whoever would approve it: the estimate must not say a
    lead will decide."""
    team.quota_gpus = Decimal(1)
    team.save(update_fields=["quota_gpus"])
    data = {**SLICE, "gpu_mode": "whole", "count": "2", "mig_profile": "", "ttl_hours": "8"}
    page = researcher_client.get("/sandboxes/estimate/", data, **HTMX).content.decode()
    assert "over quota" in page and "Refused: over the team's quota" in page
    assert "Needs a lead" not in page


def test_the_estimate_says_a_request_will_queue_when_no_node_has_room(
    researcher_client, researcher, team, whole_gpus
):
    make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    data = {**SLICE, "gpu_mode": "whole", "count": "8", "mig_profile": ""}

    page = researcher_client.get("/sandboxes/estimate/", data, **HTMX).content.decode()

    assert "Will queue until a GPU frees up" in page


def test_the_estimate_lists_what_is_wrong_instead_of_a_price(researcher_client, fleet):
    page = researcher_client.get(
        "/sandboxes/estimate/", {**SLICE, "ttl_hours": "-2"}, **HTMX
    ).content.decode()

    assert "No estimate yet" in page
    assert "above zero" in page
    assert "estimate-hourly" not in page


def test_the_estimate_does_not_wait_for_a_name(researcher_client, fleet):
    page = researcher_client.get("/sandboxes/estimate/", {**SLICE, "name": ""}, **HTMX).content.decode()

    assert "No estimate yet" not in page
    assert "$0.98" in page


def test_mig_profiles_follow_the_chosen_gpu_type_and_refresh_the_estimate(researcher_client, fleet):
    GpuTypeFactory(slug="a100-40gb", name="NVIDIA A100 40GB", memory_gb=40)

    response = researcher_client.get("/sandboxes/mig-profiles/", {"gpu_type": "a100-40gb"}, **HTMX)
    page = response.content.decode()

    assert page.lstrip().startswith('<div class="field" id="field-mig_profile">')
    assert 'value="1g.5gb"' in page and 'value="3g.20gb"' in page
    assert "1g.10gb+me" not in page
    assert response["HX-Trigger-After-Swap"] == "estimate-refresh"


def test_the_quota_rule_is_said_once_by_the_form_not_again_by_the_estimate(researcher_client, fleet):
    page = researcher_client.get("/sandboxes/new/").content.decode()
    estimate = researcher_client.get("/sandboxes/estimate/", SLICE, **HTMX).content.decode()

    assert page.count("Quota is counted in GPU equivalents") == 1
    assert 'id="estimate-hourly"' in estimate
    assert "Quota is counted in GPU equivalents" not in estimate


def test_hours_and_gpu_count_are_marked_required_like_the_other_required_fields(researcher_client, fleet):
    page = researcher_client.get("/sandboxes/new/").content.decode()
    for name in ("name", "count", "ttl_hours"):
        assert '<span class="required-mark">(required)</span>' in field_html(page, name), name


def test_a_blank_gpu_count_is_refused_not_taken_as_one(researcher_client, researcher, fleet):
    whole = {**SLICE, "gpu_mode": "whole", "count": "", "mig_profile": ""}
    page = researcher_client.post("/sandboxes/new/", whole).content.decode()
    assert "Give the number of GPUs (1 or more)." in field_html(page, "count")
    assert not Workload.objects.filter(owner=researcher).exists()


def test_a_blank_name_and_blank_hours_are_both_said_at_once(researcher_client, researcher, fleet):
    page = researcher_client.post("/sandboxes/new/", {**SLICE, "name": "", "ttl_hours": ""}).content.decode()
    assert "Give the number of hours it should live." in field_html(page, "ttl_hours")
    assert "lowercase letters, digits and hyphens" in field_html(page, "name")
    assert 'class="field-error"' in field_html(page, "name")


def test_a_scheduled_estimate_names_the_team_not_its_slug(researcher_client, fleet):
    start = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    page = researcher_client.get(
        "/sandboxes/estimate/", {**SLICE, "start_at": start}, **HTMX
    ).content.decode()
    assert "of Vision&#x27;s quota" in page or "of Vision's quota" in page
    assert "vision&#x27;s quota" not in page and "vision's quota" not in page


def test_a_scheduled_sandbox_with_its_end_asked_for_says_it_ends_then(researcher_client, researcher, fleet):
    start = (timezone.now() + timedelta(days=1)).replace(second=0, microsecond=0)
    end = start + timedelta(hours=5, minutes=7)  # 5.1166... h: kept as 5.12 h, billed exactly
    data = {
        **SLICE,
        "gpu_mode": "whole",  # $6.88 an hour: a few thousandths of an hour show in cents
        "mig_profile": "",
        "count": "1",
        "start_at": start.strftime("%Y-%m-%dT%H:%M"),
        "lifetime_mode": "until",
        "expires_at": end.strftime("%Y-%m-%dT%H:%M"),
        "ttl_hours": "",
    }
    page = researcher_client.post("/sandboxes/new/", data, follow=True).content.decode()
    assert f"It ends at {end:%Y-%m-%d %H:%M} UTC, as asked, whenever it starts." in page
    assert "Its lifetime counts from when it starts running." not in page
    from portal.core.templatetags.money import usd
    from portal.fleet.selectors import price_per_hour
    from portal.spend.selectors import to_cents
    from portal.workloads.models import Workload
    from portal.workloads.selectors import workload_price_per_hour

    sandbox = Workload.objects.get(name=SLICE["name"])
    hourly = workload_price_per_hour(
        workload=sandbox, price_per_gpu_hour=price_per_hour(gpu_type=sandbox.gpu_type)
    )
    exact = to_cents(hourly * Decimal(5 * 3600 + 7 * 60) / Decimal(3600))
    assert exact != to_cents(hourly * sandbox.lifetime_hours)  # the case where rounding the hours shows
    assert f'id="cost-so-far">{usd(exact)}<' in page  # as the request form estimated it
