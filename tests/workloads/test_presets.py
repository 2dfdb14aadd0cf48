"""Presets: saved personal or by a team's lead, checked as a request on save and on use, filling
the form server-side, visible to their owner and team only."""

from __future__ import annotations

import re

import pytest

from portal.fleet.models import GpuType
from portal.workloads.models import Preset

pytestmark = pytest.mark.django_db
URL = "/api/v1/presets"
SLICE = {"team": "vision", "gpu": {"type": "h100-80gb", "mig_profile": "1g.10gb"}, "ttl_hours": 2, "cpu": 4}


def _save(client, **fields):
    return client.post(URL, {"kind": "sandbox", "name": "small", "body": SLICE, **fields}, format="json")


def test_a_researcher_saves_a_personal_preset_and_lists_it(fleet, alice):
    saved = _save(alice, body={**SLICE, "name": "ignored", "start_at": "2030-01-01T00:00:00Z"})
    assert saved.status_code == 201, saved.json()
    assert saved.json()["team"] is None
    assert "name" not in saved.json()["body"] and "start_at" not in saved.json()["body"]
    listed = alice.get(URL).json()["results"]
    assert [p["name"] for p in listed] == ["small"]


@pytest.mark.parametrize("kind", ["sandbox", "deployment"])
def test_a_preset_keeps_only_what_a_request_reads(fleet, alice, kind):
    """Nothing the request ignores is stored, nested in the GPU either (it would be handed to
    every member of the team with a team preset)."""
    from portal.catalog.demo import catalog_seed

    catalog_seed()
    body = {**SLICE, "junk": "x" * 1000, "gpu": {**SLICE["gpu"], "junk": "x" * 100_000}}
    if kind == "deployment":
        body = {
            **body,
            "model": "llama-3.1-8b-instruct",
            "gpu": {"type": "h100-80gb", "count": 1, "junk": "x"},
        }
        del body["cpu"]
    saved = _save(alice, kind=kind, body=body)
    assert saved.status_code == 201, saved.json()
    stored = Preset.objects.get().body
    assert "junk" not in stored and "junk" not in stored["gpu"]
    assert stored["gpu"]["type"] == "h100-80gb" and stored["ttl_hours"] == 2


def test_a_bad_body_is_a_clear_400_and_nothing_is_saved(fleet, alice):
    refused = _save(alice, body={**SLICE, "gpu": {"type": "tpu-v9", "count": 1}})
    assert refused.status_code == 400
    assert "tpu-v9" in str(refused.json())
    assert not Preset.objects.exists()


def test_only_a_lead_saves_a_team_preset_and_the_team_sees_it(fleet, alice, bob, carol):
    assert _save(alice, team="vision").status_code == 403
    saved = _save(bob, team="vision", name="team-slice")
    assert saved.status_code == 201, saved.json()
    assert saved.json()["team"] == "vision"
    assert [p["name"] for p in alice.get(URL).json()["results"]] == ["team-slice"]
    assert carol.get(URL).json()["results"] == []
    # a team member may use it but not delete it; an outsider does not see it at all
    assert alice.delete(f"{URL}/{saved.json()['id']}").status_code == 403
    assert carol.delete(f"{URL}/{saved.json()['id']}").status_code == 404
    assert bob.delete(f"{URL}/{saved.json()['id']}").status_code == 204
    assert not Preset.objects.exists()


def test_others_get_404_for_a_personal_preset(fleet, alice, bob):
    saved = _save(alice)
    assert bob.delete(f"{URL}/{saved.json()['id']}").status_code == 404
    assert bob.get(URL).json()["results"] == []


def test_the_form_opens_filled_from_a_preset(fleet, alice, researcher_client):
    preset_id = _save(alice).json()["id"]
    html = researcher_client.get(f"/sandboxes/new/?preset={preset_id}").content.decode()
    assert "Filled in from: preset small (personal)" in html
    assert 'name="cpu" value="4"' in html
    assert re.search(r'<input[^>]*value="mig"[^>]*checked', html)
    assert re.search(r'<option value="1g.10gb" selected', html)


def test_a_stale_preset_says_what_no_longer_fits(fleet, alice, researcher_client):
    preset = Preset.objects.get(pk=_save(alice).json()["id"])
    preset.body = {**preset.body, "image": "retired-image"}
    preset.save()
    html = researcher_client.get(f"/sandboxes/new/?preset={preset.pk}").content.decode()
    assert "Preset small no longer fits" in html
    assert "retired-image" in html


def test_another_user_cannot_open_a_preset_in_the_form(fleet, alice, lead_client):
    preset_id = _save(alice).json()["id"]
    assert lead_client.get(f"/sandboxes/new/?preset={preset_id}").status_code == 404


def test_the_form_saves_what_it_holds_as_a_preset(fleet, researcher, researcher_client):
    form = {
        "team": "vision",
        "name": "",
        "gpu_type": GpuType.objects.get().slug,
        "gpu_mode": "whole",
        "count": 2,
        "lifetime_mode": "hours",
        "ttl_hours": 6,
        "save_preset": "1",
        "preset_name": "two-gpus",
    }
    answer = researcher_client.post("/sandboxes/new/", form, follow=True)
    assert answer.status_code == 200
    preset = Preset.objects.get(owner=researcher)
    assert preset.name == "two-gpus"
    assert preset.body["gpu"] == {"type": "h100-80gb", "count": 2}
    assert preset.body["ttl_hours"] == "6"


def test_a_preset_without_a_name_reopens_its_section_as_it_was_filled(fleet, researcher, researcher_client):
    """The refusal is said at the top; the section holding the field to fix must not come back closed."""
    form = {
        "team": "vision", "name": "", "gpu_type": GpuType.objects.get().slug, "gpu_mode": "whole",
        "count": 1, "lifetime_mode": "hours", "ttl_hours": 6, "save_preset": "1", "preset_name": " ",
        "preset_team": "1",
    }  # fmt: skip
    page = researcher_client.post("/sandboxes/new/", form).content.decode()
    assert "Name the preset (1-60 characters)." in page
    assert '<details class="fieldset-details" id="preset-save" open>' in page
    assert 'name="preset_team" value="1" checked' in page
    assert not Preset.objects.exists()
    mine = {key: value for key, value in form.items() if key != "preset_team"} | {"preset_name": "one-gpu"}
    saved = researcher_client.post("/sandboxes/new/", mine).content.decode()
    assert Preset.objects.get().name == "one-gpu"  # saved: the section closes, empty for the next one
    assert '<details class="fieldset-details" id="preset-save">' in saved and 'value="one-gpu"' not in saved


def test_the_presets_page_lists_and_deletes(fleet, alice, researcher_client):
    preset_id = _save(alice).json()["id"]
    page = researcher_client.get("/presets/").content.decode()
    assert f"/sandboxes/new/?preset={preset_id}" in page
    researcher_client.post(f"/presets/{preset_id}/delete/")
    assert not Preset.objects.exists()


def test_the_preset_choice_starts_empty_and_shows_the_one_used(fleet, alice, researcher_client):
    preset_id = _save(alice).json()["id"]
    blank = researcher_client.get("/sandboxes/new/").content.decode()
    picker = blank.split('id="preset-choice"')[1].split("</select>")[0]
    assert '<option value="">—</option>' in picker
    assert " selected" not in picker  # no preset looks chosen on a fresh form
    filled = researcher_client.get(f"/sandboxes/new/?preset={preset_id}").content.decode()
    picker = filled.split('id="preset-choice"')[1].split("</select>")[0]
    assert f'<option value="{preset_id}" selected>' in picker


def test_the_presets_page_says_what_each_preset_fills_in(fleet, alice, bob, researcher_client):
    _save(alice, body={**SLICE, "project": "llm-eval", "purpose": "Quick evals", "datasets": []})
    whole = {"team": "vision", "gpu": {"type": "h100-80gb", "count": 2}, "ttl_hours": 6}
    assert _save(alice, name="pair", body=whole).status_code == 201
    page = researcher_client.get("/presets/").content.decode()
    small = page.split("small</a>")[1].split("</tr>")[0]
    assert "team Vision · one 1g.10gb slice of h100-80gb · 2 h · project llm-eval · 4 CPUs" in small
    assert "Quick evals" in small
    pair = page.split("pair</a>")[1].split("</tr>")[0]
    assert "team Vision · 2 h100-80gb GPUs · 6 h" in pair


def test_a_deployment_preset_names_its_model_and_replicas():
    from portal.workloads.presets import preset_summary

    body = {
        "team": "nlp",
        "model": "llama-3.1-8b-instruct",
        "replicas": 2,
        "ttl_hours": "24",
        "context": 4096,
    }
    assert preset_summary(body) == [
        "team nlp",
        "model llama-3.1-8b-instruct",
        "the cheapest GPU that fits",
        "2 replicas",
        "24 h",
        "4096 tokens context",
    ]
    fixed_end = {
        "team": "nlp",
        "gpu": {"type": "a100-80gb", "mig_profile": "3g.40gb"},
        "expires_at": "2030-01-01T00:00Z",
    }
    assert preset_summary(fixed_end) == [
        "team nlp",
        "one 3g.40gb slice of a100-80gb",
        "until Jan 1, 2030 00:00 UTC",
    ]


def test_a_preset_of_the_same_name_is_replaced_only_when_asked_and_a_typed_name_is_saved_with_the_request(
    run_jobs, fleet, researcher, researcher_client
):
    gpu_type = GpuType.objects.get().slug
    base = {"team": "vision", "name": "", "gpu_type": gpu_type, "gpu_mode": "whole", "lifetime_mode": "hours",
            "ttl_hours": 6, "save_preset": "1", "preset_name": "mine"}  # fmt: skip
    researcher_client.post("/sandboxes/new/", {**base, "count": 1})
    refused = researcher_client.post("/sandboxes/new/", {**base, "count": 2}).content.decode()
    assert "A preset called mine exists already: tick “Replace it”" in refused
    assert '<details class="fieldset-details" id="preset-save" open>' in refused
    assert Preset.objects.get().body["gpu"]["count"] == 1  # kept
    researcher_client.post("/sandboxes/new/", {**base, "count": 2, "preset_replace": "1"})
    assert Preset.objects.get().body["gpu"]["count"] == 2

    requested = {**base, "count": 1, "name": "box", "preset_name": "for-box"}
    del requested["save_preset"]
    answer = run_jobs(lambda: researcher_client.post("/sandboxes/new/", requested, follow=True))
    assert "Saved preset for-box (personal)." in answer.content.decode()
    assert Preset.objects.filter(name="for-box").exists()
