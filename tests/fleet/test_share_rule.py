"""The slice share rule users read is the one quota and billing apply."""

from __future__ import annotations

from portal.fleet.geometry import GPU_MODELS
from portal.fleet.selectors import share_rule_text, slice_share


def test_the_compute_rule_is_stated_and_applied(settings):
    settings.PORTAL_MIG_SHARE_RULE = "compute"
    shape = GPU_MODELS["h100-80gb"].profile("3g.40gb")
    assert slice_share(shape) == (3, 7)
    assert share_rule_text().endswith("a MIG slice its compute slices / 7 (a 1g.10gb is 1/7).")


def test_the_memory_rule_is_stated_and_applied(settings):
    settings.PORTAL_MIG_SHARE_RULE = "memory"
    shape = GPU_MODELS["h100-80gb"].profile("3g.40gb")
    assert slice_share(shape) == (4, 8)
    assert share_rule_text().endswith("a MIG slice its memory slots / 8 (a 1g.10gb is 1/8).")
