"""Audit events in words people read: "Asked to scale", not "deployment.scale_requested", and the
times in their details written as everywhere else in the portal ("2026-12-01 13:00 UTC").

Events keep their action codes (the audit filter, the API and the CSV export name them); pages
show these words instead.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

WORKLOAD_KINDS = ("sandbox", "deployment")

# What happened to a sandbox or a deployment, by the part of its action after the kind.
WORKLOAD_WORDS = {
    "request": "Requested",
    "approved": "Approved",
    "rejected": "Rejected",
    "withdrawn": "Withdrawn",
    "placed": "Placed on GPUs",
    "requeued": "Back in the queue",
    "running": "Started running",
    "scale_requested": "Asked to scale",
    "scale_withdrawn": "Scale request withdrawn",
    "scaled": "Scaling",
    "scaled_running": "Running at its new scale",
    "extend_requested": "Asked for more time",
    "extend": "Extended",
    "extend_withdrawn": "Extension withdrawn",
    "terminating": "Ending",
    "terminated": "Ended",
    "expired": "Expired",
    "failing": "Failing",
    "failed": "Failed",
    "degraded": "Degraded",
    "recovered": "Running well again",
    "restart": "Restart asked for",
    "restarted": "Restarted",
    "idle_warned": "Warned: idle",
    "idle_cleared": "Busy again",
    "kept": "Kept though idle",
    "reclaimed": "Reclaimed for being idle",
    "budget_stopped": "Stopped: budget spent",
    "removal_stuck": "Removal stuck",
    "drift_repaired": "Repaired in the cluster",
    "access_failed": "Route, quota or keys not updated",
    "share": "Sharing changed",
    "kubeconfig": "Kubeconfig issued",
    "kubectl_revoked": "Kubeconfigs revoked",
}

# Every other action, whole.
ACTION_WORDS = {
    "approval.approve": "Request approved",
    "approval.reject": "Request rejected",
    "approval.withdrawn": "Request withdrawn",
    "approval.reminded": "Leads reminded",
    "token.create": "Token created",
    "token.revoke": "Token revoked",
    "preset.save": "Preset saved",
    "preset.delete": "Preset deleted",
    "home.created": "Home volume created",
    "home.resize": "Home volume resized",
    "home.team_changed": "Home volume billed to another team",
    "home.delete": "Home volume deleted",
    "team.budget_policy": "Budget policy changed",
    "team.budget_alert": "Budget alert sent",
    "team.budget_stop_set": "Budget stop set",
    "team.budget_stop_lifted": "Budget stop lifted",
    "team.target_budget_set": "User or project budget set",
    "team.target_budget_deleted": "User or project budget deleted",
    "team.target_budget_alert": "User or project budget alert sent",
    "team.target_budget_stop_set": "User or project budget stop set",
    "team.target_budget_stop_lifted": "User or project budget stop lifted",
    "team.notifications_set": "Team notifications changed",
    "team.idle_reclaim_set": "Idle reclaim changed",
    "user.sso_sign_in": "Signed in with SSO",
    "user.sso_refused": "SSO sign-in refused",
    "user.sso_link": "SSO account linked",
    "user.sso_admin_grant": "Made admin by SSO",
    "user.sso_admin_revoke": "Admin taken away by SSO",
    "user.break_glass_sign_in": "Break-glass sign-in",
    "membership.sso_grant": "Team membership given by SSO",
    "membership.sso_revoke": "Team membership taken away by SSO",
    "membership.sso_role": "Team role changed by SSO",
    "cluster.discovered": "GPU nodes discovered",
    "cluster.discovery_requested": "Node discovery asked for",
    "cluster.discovery_failed": "Node discovery failed",
    "cluster.orphan_found": "Orphan found in the cluster",
    "cluster.orphan_confirmed": "Orphan removal confirmed",
    "cluster.orphan_confirmation_withdrawn": "Orphan kept",
    "cluster.orphan_removed": "Orphan removed",
    "cluster.orphan_cleared": "Orphan gone",
    "namespace.orphan_deleted": "Orphan namespace deleted",
    "node.mig_taken_over": "MIG layout taken over",
    "fleet.corrected": "Fleet corrected from the cluster",
    "fleet.mismatch": "Fleet differs from the cluster",
    "gpu.lost": "GPU lost",
    "gpu.xid": "GPU reported XID errors",
    "gpu.ok": "GPU healthy again",
    "gpu.cleared": "GPU health cleared",
}


def action_words(action: str) -> str:
    """An audit action as words; an action not listed reads as its words ("team.budget_set" is
    "Team: budget set"), never as its code."""
    if action in ACTION_WORDS:
        return ACTION_WORDS[action]
    kind, _, what = action.partition(".")
    if kind in WORKLOAD_KINDS and what in WORKLOAD_WORDS:
        return WORKLOAD_WORDS[what]
    if not what:
        return kind.replace("_", " ").capitalize()
    if kind in WORKLOAD_KINDS:
        return what.replace("_", " ").capitalize()
    return f"{kind.replace('_', ' ').capitalize()}: {what.replace('_', ' ')}"


def actions_worded(text: str) -> list[str]:
    """The actions (codes) whose words contain `text`, ignoring case: "extended" finds
    sandbox.extend and deployment.extend, as a person reading the log would look for them."""
    wanted = text.strip().lower()
    if not wanted:
        return []
    codes = [*ACTION_WORDS, *(f"{kind}.{what}" for kind in WORKLOAD_KINDS for what in WORKLOAD_WORDS)]
    return [code for code in codes if wanted in action_words(code).lower()]


# An ISO 8601 time as older events wrote it: 2026-12-01T13:00+00:00, 2026-12-01T13:00:05.123Z
_ISO_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")


def _readable_time(match: re.Match[str]) -> str:
    text = match.group(0)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def detail_words(detail: str) -> str:
    """An event's detail with its times as the portal writes them ("2026-12-01 13:00 UTC")."""
    return _ISO_TIME.sub(_readable_time, detail or "")
