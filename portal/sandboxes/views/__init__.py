"""Sandbox web views: the pages and their panels, the gate in front of sandboxes' routes, and
the user's home."""

from portal.sandboxes.views.gate import (
    sandbox_gate_check,
    sandbox_gate_external,
    sandbox_gate_signin,
    sandbox_simulated,
)
from portal.sandboxes.views.home import home_delete_posted, home_page, home_resize_posted
from portal.sandboxes.views.pages import (
    dashboard,
    sandbox_detail,
    sandbox_estimate_panel,
    sandbox_insight_panel,
    sandbox_keep_posted,
    sandbox_kubeconfig_download,
    sandbox_kubectl_panel,
    sandbox_mig_profiles,
    sandbox_new,
    sandbox_restart_posted,
    sandbox_share_posted,
)

__all__ = [
    "dashboard",
    "home_delete_posted",
    "home_page",
    "home_resize_posted",
    "sandbox_detail",
    "sandbox_estimate_panel",
    "sandbox_gate_check",
    "sandbox_gate_external",
    "sandbox_gate_signin",
    "sandbox_insight_panel",
    "sandbox_keep_posted",
    "sandbox_kubeconfig_download",
    "sandbox_kubectl_panel",
    "sandbox_mig_profiles",
    "sandbox_new",
    "sandbox_restart_posted",
    "sandbox_share_posted",
    "sandbox_simulated",
]
