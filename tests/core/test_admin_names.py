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
