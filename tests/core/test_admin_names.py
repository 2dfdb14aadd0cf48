"""The admin names things as people write them: "GPU types", not "Gpu types" or "Sandboxs"."""

from __future__ import annotations

import re

from django.contrib import admin

ACRONYMS = re.compile(r"\b(gpu|gpus|api|mig|oidc)\b", re.IGNORECASE)


def test_every_admin_model_has_a_plural_and_its_acronyms_in_capitals():
    for model in admin.site._registry:
        plural = str(model._meta.verbose_name_plural)
        assert not re.search(r"[^aeiou]ys\b", plural), plural  # "identitys"
        for word in ACRONYMS.findall(plural) + ACRONYMS.findall(str(model._meta.verbose_name)):
            assert word.upper() == word or word == "GPUs", (model, word)


def test_the_team_form_labels_read_as_words_with_their_units():
    from portal.accounts.models import Team

    labels = {field.name: str(field.verbose_name) for field in Team._meta.fields}
    assert labels["quota_gpus"] == "GPU quota (GPU equivalents)"
    assert labels["auto_approve_max_gpus"] == "auto-approve up to (GPUs)"
    assert labels["home_gb_default"] == "default home size (GB)"
    assert labels["webhook_url"] == "webhook URL"
    for name, label in labels.items():  # no "gb", "url" or "hf" as the field's name spells it
        assert not re.search(r"\b(gb|url|hf|gpus?)\b", label), (name, label)


def test_the_teams_list_shows_quota_money_and_hours_as_people_write_them(admin_client, team):
    page = admin_client.get("/admin/accounts/team/").content.decode()
    assert "16 GPU equivalents" in page and "16.000" not in page
    assert "$50,000.00" in page and "50000.00" not in page
    assert "24 h" in page and "168 h" in page
    form = admin_client.get(f"/admin/accounts/team/{team.pk}/change/").content.decode()
    assert "Default home size (GB)" in form and "Home gb default" not in form
    assert "Webhook URL" in form
