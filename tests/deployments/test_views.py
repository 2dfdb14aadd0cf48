"""The deployment pages: catalog -> deploy form (GPU choices, live estimate) -> detail -> scale ->
terminate; htmx fragments; the list with bounded queries; scale requests in the approvals inbox."""

from __future__ import annotations

import re

import pytest
from django.conf import settings as django_settings
from django.test import Client

from portal.catalog.models import CatalogModel
from portal.deployments.models import Serving
from portal.deployments.services import deployment_request
from portal.workloads.models import Approval, Workload, WorkloadState
from tests.conftest import field_html, signed_in

HTMX = {"HTTP_HX_REQUEST": "true"}
LLAMA_8B_ON_H100 = {
    "team": "vision",
    "name": "llama-chat",
    "model": "llama-3.1-8b-instruct",
    "sized_model": "llama-3.1-8b-instruct",
    "dtype": "bf16",
    "context": "8192",
    "concurrency": "8",
    "gpu": "h100-80gb/1",
    "replicas": "1",
    "ttl_hours": "4",
    "purpose": "Chat for the desk",
}


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(researcher) -> Client:
    return signed_in(researcher)


@pytest.fixture
def bob(lead) -> Client:
    return signed_in(lead)


@pytest.fixture
def carol(other_researcher) -> Client:
    return signed_in(other_researcher)


def deployed(run_jobs, user, **fields) -> Workload:
    kwargs = {"team": "vision", "name": "llama-chat", "model": "llama-3.1-8b-instruct", **fields}
    workload = run_jobs(lambda: deployment_request(user=user, **kwargs))
    workload.refresh_from_db()
    return workload


def test_the_catalog_model_page_links_to_the_deploy_form_with_the_model_chosen(alice, fleet, catalog):
    page = alice.get("/catalog/llama-3.1-8b-instruct/").content.decode()
    assert 'href="/deployments/new/?model=llama-3.1-8b-instruct"' in page
    assert 'href="/deployments/"' in page  # the nav link


def test_the_deploy_form_preselects_the_model_and_lists_the_fits_cheapest_first(alice, fleet, catalog):
    page = alice.get("/deployments/new/?model=llama-3.1-8b-instruct").content.decode()

    assert '<option value="llama-3.1-8b-instruct" selected>' in page
    assert '<option value="bf16" selected>' in page
    gpu = field_html(page, "gpu")
    options = re.findall(r'<option value="([^"]*)"', gpu)
    assert options[0] == ""  # the cheapest fit, by default
    assert "Cheapest fit: 3g.40gb slice of h100-80gb · $2.95/h per replica" in gpu
    assert options[1:] == ["h100-80gb/3g.40gb", "h100-80gb/4g.40gb", "h100-80gb/1", "h100-80gb/7g.80gb"]
    assert "Needs 27.76 GB: fits on one GPU or MIG slice." in gpu
    assert '<option value="vision"' in page


def test_a_deploy_on_one_h100_goes_to_its_page_running_with_endpoint_and_example(
    alice, researcher, fleet, catalog, run_jobs
):
    response = run_jobs(lambda: alice.post("/deployments/new/", LLAMA_8B_ON_H100))

    workload = Workload.objects.get(owner=researcher, kind="deployment", name="llama-chat")
    assert response.status_code == 302
    assert response["Location"] == f"/deployments/{workload.number}/"
    assert (workload.gpu_count, workload.mig_profile, workload.state) == (1, "", WorkloadState.RUNNING)

    page = alice.get(response["Location"]).content.decode()
    assert 'class="state state-running"' in page
    assert "1 of 1 ready" in page
    assert f"<code>{workload.access}</code>" in page
    host = workload.access.removeprefix("https://")
    assert f"curl -s {django_settings.PORTAL_BASE_URL}/simulated-endpoint/{host}/v1/chat/completions" in page
    assert "meta-llama/Llama-3.1-8B-Instruct" in page
    assert "replica 0: gpu-h100-a · GPU 0" in page
    assert "$6.88" in page
    assert "deployment.request" in page and "deployment.running" in page  # the audit trail
    assert "“Chat for the desk”" in page


def test_a_gpu_the_model_does_not_fit_shows_the_error_next_to_the_gpu_field(alice, fleet, catalog):
    data = {
        **LLAMA_8B_ON_H100,
        "model": "llama-3.1-70b-instruct",
        "sized_model": "llama-3.1-70b-instruct",
        "gpu": "h100-80gb/2",
    }
    page = alice.post("/deployments/new/", data).content.decode()

    assert "needs at least 4 h100-80gb GPUs at these settings" in field_html(page, "gpu")
    assert "Needs at least 4 \N{MULTIPLICATION SIGN} 80 GB GPUs" in field_html(page, "gpu")
    assert not Workload.objects.exists()


def test_bad_sizing_and_names_show_next_to_their_fields(alice, fleet, catalog):
    data = {**LLAMA_8B_ON_H100, "name": "Not A Name!", "context": "999999", "replicas": "0"}
    page = alice.post("/deployments/new/", data).content.decode()

    assert "At most 131,072 tokens" in field_html(page, "context")
    assert "A whole number of replicas from 1 to 16." in field_html(page, "replicas")
    assert not Workload.objects.exists()
    many = alice.post("/deployments/new/", {**data, "replicas": "100"}).content.decode()
    assert "A whole number of replicas from 1 to 16." in field_html(many, "replicas")

    named = alice.post("/deployments/new/", {**LLAMA_8B_ON_H100, "name": "Not A Name!"}).content.decode()
    assert "lowercase letters, digits and hyphens" in field_html(named, "name")


def test_changing_the_model_redraws_its_sizing_fields_out_of_band_and_refreshes_the_estimate(
    alice, fleet, catalog
):
    data = {**LLAMA_8B_ON_H100, "model": "bge-large-en-v1.5", "gpu": "h100-80gb/1"}
    response = alice.get("/deployments/new/fits/", data, **HTMX)
    page = response.content.decode()

    assert page.lstrip().startswith('<div class="field" id="field-gpu">')
    assert response["HX-Trigger-After-Swap"] == "estimate-refresh"
    assert 'id="sizing-fields" class="row three" hx-swap-oob="true"' in page
    assert '<option value="fp16" selected>' in page  # BGE's default precision
    assert 'name="context" value="512"' in page  # its maximum context
    assert 'name="sized_model" value="bge-large-en-v1.5"' in page
    assert "<html" not in page
    assert "Cheapest fit: 1g.10gb slice of h100-80gb" in page


def test_an_image_classifier_is_asked_for_no_tokens_and_its_page_names_none(
    alice, researcher, fleet, catalog, run_jobs
):
    data = {**LLAMA_8B_ON_H100, "model": "resnet-50", "gpu": ""}
    page = alice.get("/deployments/new/fits/", data, **HTMX).content.decode()
    # no sequence, so no context or concurrency to ask for: they go with the form, unseen
    assert 'type="hidden" name="context"' in page and 'type="hidden" name="concurrency"' in page
    assert "Context (tokens)" not in page and "Concurrent sequences" not in page
    assert "Context (tokens)" in alice.get("/deployments/new/?model=bge-large-en-v1.5").content.decode()
    form = alice.get("/deployments/new/?model=resnet-50").content.decode()
    assert 'type="hidden" name="context"' in form and "Context (tokens)" not in form

    run_jobs(lambda: alice.post("/deployments/new/", {**data, "name": "pets", "dtype": "fp16"}))
    workload = Workload.objects.get(owner=researcher, name="pets")
    detail = alice.get(f"/deployments/{workload.number}/").content.decode()
    assert "ResNet-50</a> in fp16 · " in detail and "sequences" not in detail
    llama = run_jobs(lambda: alice.post("/deployments/new/", LLAMA_8B_ON_H100))
    assert llama.status_code == 302
    assert "in bf16, 8,192 tokens × 8 sequences · " in alice.get(llama["Location"]).content.decode()  # noqa: RUF001


def test_a_bigger_context_narrows_the_gpu_choice_without_redrawing_the_fields(alice, fleet, catalog):
    data = {**LLAMA_8B_ON_H100, "context": "131072", "concurrency": "8", "gpu": "h100-80gb/3g.40gb"}
    page = alice.get("/deployments/new/fits/", data, **HTMX).content.decode()

    assert "sizing-fields" not in page
    assert "h100-80gb/3g.40gb" not in page  # no longer holds it; back to the cheapest fit
    assert re.search(r'<option value="" selected>Cheapest fit: 4x h100-80gb', page)


def test_the_estimate_prices_every_replica_and_says_when_a_lead_must_approve(alice, fleet, catalog):
    cheapest = alice.get(
        "/deployments/new/estimate/", {**LLAMA_8B_ON_H100, "gpu": ""}, **HTMX
    ).content.decode()
    assert 'id="estimate-hourly">$2.95<' in cheapest
    assert 'id="estimate-total">$11.80<' in cheapest  # 4 hours
    assert "Approved at once" in cheapest

    two = alice.get(
        "/deployments/new/estimate/", {**LLAMA_8B_ON_H100, "replicas": "2"}, **HTMX
    ).content.decode()
    assert 'id="estimate-hourly">$13.76<' in two
    assert "2 replicas of 1x h100-80gb (80 GB) at $6.88/h each" in two
    assert "Needs a lead&#x27;s approval: more than 1 whole GPU." in two

    wrong = alice.get(
        "/deployments/new/estimate/", {**LLAMA_8B_ON_H100, "ttl_hours": "-1"}, **HTMX
    ).content.decode()
    assert "No estimate yet" in wrong and "above zero" in wrong


def test_the_estimate_warns_of_a_gated_model_the_team_has_no_token_for(alice, team, fleet, catalog):
    """Llama's checkpoint is gated on the hub: without the team's Hugging Face token its model
    server could not download it. A quantization from another repository needs none."""
    url = "/deployments/new/estimate/"
    page = alice.get(url, LLAMA_8B_ON_H100, **HTMX).content.decode()
    assert 'id="estimate-hf-token"' in page and "the team has no Hugging Face token" in page
    awq = alice.get(url, {**LLAMA_8B_ON_H100, "dtype": "awq-int4", "gpu": ""}, **HTMX).content.decode()
    assert 'id="estimate-hourly"' in awq and 'id="estimate-hf-token"' not in awq
    qwen = {**LLAMA_8B_ON_H100, "model": "qwen2.5-7b-instruct", "sized_model": "qwen2.5-7b-instruct"}
    assert 'id="estimate-hf-token"' not in alice.get(url, qwen, **HTMX).content.decode()
    team.hf_token = "hf_" + "x" * 34
    team.save()
    assert 'id="estimate-hf-token"' not in alice.get(url, LLAMA_8B_ON_H100, **HTMX).content.decode()


def test_the_catalog_says_which_models_are_gated(alice, admin_client, catalog):
    listed = alice.get("/catalog/").content.decode()
    assert listed.count(">gated</span>") == 6  # Llama (three), Mistral, Mixtral, Gemma
    assert 'id="model-gated"' in alice.get("/catalog/llama-3.1-8b-instruct/").content.decode()
    assert 'id="model-gated"' not in alice.get("/catalog/qwen2.5-7b-instruct/").content.decode()
    assert alice.get("/api/v1/catalog/models/gemma-2-9b-it").json()["gated"] is True
    gemma = CatalogModel.objects.get(slug="gemma-2-9b-it")
    assert (
        'name="gated"' in admin_client.get(f"/admin/catalog/catalogmodel/{gemma.pk}/change/").content.decode()
    )


def test_the_detail_fragment_is_only_the_live_card(alice, researcher, fleet, catalog, run_jobs):
    workload = deployed(run_jobs, researcher, gpu_type="h100-80gb", count=1)
    page = alice.get(f"/deployments/{workload.number}/", **HTMX).content.decode()

    assert page.lstrip().startswith('<section id="deployment-live"')
    assert 'hx-trigger="every 3s"' in page
    assert "Audit trail" not in page and "<html" not in page
    assert 'id="nav-approvals-badge"' in page  # the nav badges, out of band
    assert 'id="deployment-panels"' not in page  # the charts stay as the page drew them

    polled = alice.get(
        f"/deployments/{workload.number}/?panels=01", **HTMX
    ).content.decode()  # drawn unstarted
    assert '<div id="deployment-panels" hx-swap-oob="true">' in polled and 'id="deployment-cost"' in polled


def test_scale_up_waits_for_a_lead_who_sees_it_in_the_inbox_then_down_and_terminate(
    alice, bob, researcher, fleet, catalog, run_jobs
):
    workload = deployed(run_jobs, researcher)  # the cheapest fit: one 3g.40gb slice

    response = run_jobs(
        lambda: alice.post(f"/deployments/{workload.number}/scale/", {"replicas": "2"}, follow=True)
    )
    page = response.content.decode()
    assert "needs a lead&#x27;s approval" in page
    assert "Scaling to 2 waits for a lead." in page
    too_many = alice.post(f"/deployments/{workload.number}/scale/", {"replicas": "100"}, follow=True)
    assert "Replicas: A whole number of replicas from 0 to 16." in too_many.content.decode()
    assert 'id="withdraw-scale-form"' in page and "Withdraw the scale to 2 replicas" in page
    withdrawn = alice.post(f"/deployments/{workload.number}/scale/withdraw/", follow=True).content.decode()
    assert "Scale request withdrawn; the replicas stay as they are." in withdrawn
    assert "waits for a lead" not in withdrawn and 'id="withdraw-scale-form"' not in withdrawn
    again = alice.post(f"/deployments/{workload.number}/scale/withdraw/", follow=True).content.decode()
    assert "No scale of deployment" in again
    run_jobs(lambda: alice.post(f"/deployments/{workload.number}/scale/", {"replicas": "2"}))
    approval = Approval.objects.get(workload=workload, kind=Approval.Kind.SCALE, state=Approval.State.PENDING)

    inbox = bob.get("/approvals/").content.decode()
    assert "scale to 2 replicas" in inbox
    assert f'href="/deployments/{workload.number}/"' in inbox
    assert "now 1, asks 2 replicas" in inbox
    run_jobs(lambda: bob.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"}))

    page = alice.get(f"/deployments/{workload.number}/").content.decode()
    assert "2 of 2 ready" in page
    assert "replica 0: gpu-h100-b" in page and "replica 1: gpu-h100-b" in page

    response = run_jobs(
        lambda: alice.post(f"/deployments/{workload.number}/scale/", {"replicas": "1"}, follow=True)
    )
    page = response.content.decode()
    assert "Scaling to 1 replica." in page
    assert "1 of 1 ready" in page and "replica 1:" not in page

    response = run_jobs(lambda: alice.post(f"/deployments/{workload.number}/terminate/", follow=True))
    assert "billing stopped" in response.content.decode()
    page = alice.get(f"/deployments/{workload.number}/").content.decode()  # once the cluster let go
    assert 'class="state state-terminated"' in page
    assert "gone with the deployment" in page
    assert "Try it" not in page and 'id="deployment-actions"' not in page


def test_scaling_an_ended_deployment_says_why(alice, researcher, fleet, catalog, run_jobs):
    workload = deployed(run_jobs, researcher)
    run_jobs(lambda: alice.post(f"/deployments/{workload.number}/terminate/"))
    page = alice.post(
        f"/deployments/{workload.number}/scale/", {"replicas": "2"}, follow=True
    ).content.decode()
    assert "only a live, placed one can be scaled" in page
    page = alice.post(f"/deployments/{workload.number}/extend/", {"hours": "2"}, follow=True).content.decode()
    assert "only a live" in page


def test_extend_moves_the_expiry(alice, researcher, fleet, catalog, run_jobs):
    workload = deployed(run_jobs, researcher, ttl_hours=4)
    page = alice.post(f"/deployments/{workload.number}/extend/", {"hours": "2"}, follow=True).content.decode()
    assert "Extended: it now expires" in page
    before = workload.expires_at
    workload.refresh_from_db()
    assert (workload.expires_at - before).total_seconds() == pytest.approx(7200, abs=1)


def test_others_get_404(carol, researcher, fleet, catalog, run_jobs):
    workload = deployed(run_jobs, researcher)
    assert carol.get(f"/deployments/{workload.number}/").status_code == 404
    assert "llama-chat" not in carol.get("/deployments/").content.decode()


def test_the_list_shows_model_replicas_endpoint_and_cost_and_polls_while_live(
    alice, researcher, fleet, catalog, run_jobs
):
    workload = deployed(run_jobs, researcher, gpu_type="h100-80gb", count=1)

    page = alice.get("/deployments/").content.decode()
    row = re.search(rf'<tr id="deployment-row-{workload.pk}".*?</tr>', page, re.S).group(0)
    assert "Llama 3.1 8B Instruct" in row
    assert "1x h100-80gb" in row
    assert ">1/1<" in row
    assert f"<code>{workload.access}</code>" in row
    assert "$0.00" in row and "$6.88" in row
    assert 'data-polling="on"' in page

    fragment = alice.get("/deployments/?state=running", **HTMX).content.decode()
    assert fragment.lstrip().startswith('<section id="deployment-table"')
    assert "llama-chat" in fragment
    assert "llama-chat" not in alice.get("/deployments/?state=terminated", **HTMX).content.decode()


def test_a_lead_opens_on_the_teams_deployments(bob, researcher, fleet, catalog, run_jobs):
    deployed(run_jobs, researcher)
    opened = bob.get("/deployments/").content.decode()
    assert "llama-chat" in opened and "<th>Owner</th>" in opened
    assert "llama-chat" in bob.get("/deployments/?scope=team").content.decode()
    assert "llama-chat" not in bob.get("/deployments/?scope=mine").content.decode()


def test_the_list_takes_the_same_queries_for_many_deployments(
    alice, researcher, fleet, catalog, run_jobs, django_assert_max_num_queries
):
    for n in range(2):
        deployed(run_jobs, researcher, name=f"few-{n}")
    with django_assert_max_num_queries(12) as few:
        alice.get("/deployments/", **HTMX)
    for n in range(6):
        deployed(run_jobs, researcher, name=f"many-{n}")
    assert Serving.objects.count() == 8
    with django_assert_max_num_queries(len(few.captured_queries)):
        page = alice.get("/deployments/", **HTMX).content.decode()
    assert page.count('id="deployment-row-') == 8


def test_the_estimate_counts_quota_with_the_chosen_slice_as_its_example(alice, fleet, catalog):
    small = {
        **LLAMA_8B_ON_H100,
        "model": "qwen2.5-0.5b-instruct",
        "sized_model": "qwen2.5-0.5b-instruct",
        "context": "4096",
        "concurrency": "1",
        "gpu": "h100-80gb/1g.10gb",
    }
    page = alice.get("/deployments/new/estimate/", small, **HTMX).content.decode()
    assert "1 replica of 1g.10gb" in page
    assert "(a 1g.10gb is 1/7), for every replica." in page
    assert "3g.40gb is 3/7" not in page
    assert page.count("Quota is counted in GPU equivalents") == 1


def test_a_pending_deployment_says_extending_applies_at_once_in_good_grammar(
    alice, researcher, fleet, catalog, run_jobs
):
    workload = deployed(run_jobs, researcher, gpu_type="h100-80gb", count=4, ttl_hours=48)
    assert workload.state == WorkloadState.PENDING_APPROVAL
    page = alice.get(f"/deployments/{workload.number}/").content.decode()
    assert "Extending applies at once within the team's policy" in page
    assert "Extending apply" not in page
    # what it will cost once placed: 4 whole H100s at $6.88 for 48 h
    assert 'id="cost-so-far">$1,320.96<div class="sub" id="estimate-note">$27.52/h for its 48 h' in page


def test_a_blank_name_is_said_beside_the_other_errors_at_once(alice, fleet, catalog):
    page = alice.post("/deployments/new/", {**LLAMA_8B_ON_H100, "name": "", "ttl_hours": ""}).content.decode()
    assert "Give the number of hours it should live." in field_html(page, "ttl_hours")
    assert "lowercase letters, digits and hyphens" in field_html(page, "name")
    assert not Workload.objects.exists()


def test_a_deployment_may_be_asked_for_until_a_time_as_a_sandbox_can(alice, fleet, catalog, run_jobs):
    from datetime import timedelta

    from django.utils import timezone

    end = (timezone.now() + timedelta(hours=6)).replace(second=0, microsecond=0)
    until = {
        **LLAMA_8B_ON_H100,
        "lifetime_mode": "until",
        "ttl_hours": "",
        "expires_at": end.strftime("%Y-%m-%dT%H:%M"),
    }
    estimate = alice.get("/deployments/new/estimate/", until, **HTMX).content.decode()
    assert 'id="estimate-hourly">$6.88<' in estimate and "$41.2" in estimate  # about 6 h at $6.88
    assert f"until {end:%Y-%m-%d %H:%M} UTC, as asked" in estimate  # the end is fixed: waiting counts
    stale_hours = alice.get(
        "/deployments/new/estimate/", {**until, "ttl_hours": "0"}, **HTMX
    ).content.decode()
    assert 'id="estimate-hourly">$6.88<' in stale_hours  # a hidden hours field left at 0 counts for nothing

    page = alice.get("/deployments/new/").content.decode()
    assert 'name="lifetime_mode" value="until"' in page and 'name="expires_at"' in page
    missing = alice.post("/deployments/new/", {**until, "expires_at": ""}).content.decode()
    assert "Pick the time it should end." in field_html(missing, "expires_at")
    past = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert "Pick a time in the future." in field_html(
        alice.post("/deployments/new/", {**until, "expires_at": past}).content.decode(), "expires_at"
    )
    later, soon = (timezone.now() + timedelta(hours=h) for h in (3, 2))
    scheduled = {
        **until,
        "start_at": later.strftime("%Y-%m-%dT%H:%M"),
        "expires_at": soon.strftime("%Y-%m-%dT%H:%M"),
    }
    assert "Pick a time after its scheduled start." in field_html(
        alice.post("/deployments/new/", scheduled).content.decode(), "expires_at"
    )
    response = run_jobs(lambda: alice.post("/deployments/new/", until))
    assert response.status_code == 302, response.content.decode()[:500]
    assert Workload.objects.get(name=LLAMA_8B_ON_H100["name"]).expires_at == end
