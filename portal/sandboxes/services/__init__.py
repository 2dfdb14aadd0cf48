"""Sandbox services: requests and what their owners do with a running sandbox (share, restart,
events and log, kubectl), an ssh sandbox's host key, and their persistent homes. Other apps
import from here."""

from portal.sandboxes.services.again import sandbox_request_body
from portal.sandboxes.services.home import (
    HOME_DELETE_TASK,
    HomeClaim,
    home_attached,
    home_claim,
    home_delete,
    home_deleted,
    home_observed,
    home_of,
    home_resize,
    home_trouble,
)
from portal.sandboxes.services.host_key import sandbox_ssh_host_key, sandbox_ssh_host_key_forget
from portal.sandboxes.services.sandbox import (
    KUBE_TOKEN_MAX,
    SandboxEstimateFields,
    SandboxFields,
    sandbox_estimate,
    sandbox_insight_record,
    sandbox_insight_request,
    sandbox_kube_access_held,
    sandbox_kube_access_issued,
    sandbox_kube_access_request,
    sandbox_kube_access_revoke,
    sandbox_kube_access_voided,
    sandbox_request,
    sandbox_restart,
    sandbox_share,
)

__all__ = [
    "HOME_DELETE_TASK",
    "KUBE_TOKEN_MAX",
    "HomeClaim",
    "SandboxEstimateFields",
    "SandboxFields",
    "home_attached",
    "home_claim",
    "home_delete",
    "home_deleted",
    "home_observed",
    "home_of",
    "home_resize",
    "home_trouble",
    "sandbox_estimate",
    "sandbox_insight_record",
    "sandbox_insight_request",
    "sandbox_kube_access_held",
    "sandbox_kube_access_issued",
    "sandbox_kube_access_request",
    "sandbox_kube_access_revoke",
    "sandbox_kube_access_voided",
    "sandbox_request",
    "sandbox_request_body",
    "sandbox_restart",
    "sandbox_share",
    "sandbox_ssh_host_key",
    "sandbox_ssh_host_key_forget",
]
