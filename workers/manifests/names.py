"""Names, label keys and label values for the objects of a workload (a sandbox or a deployment).

Kubernetes is strict about names (DNS-1123 labels, at most 63 characters) and label values; team
and sandbox names typed by people are not. These helpers turn the one into the other, stably, so
that running a reconcile twice derives the same names.
"""

from __future__ import annotations

import re
import unicodedata

from workers.spec import WorkloadSpec

MANAGED_BY_KEY = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-portal"
NAME_KEY = "app.kubernetes.io/name"
# Label keys and object names say "sandbox" for every workload: objects already on clusters carry
# them, and drift repair and status lookups find workloads by them.
SANDBOX_ID_KEY = "gpu-portal/sandbox-id"
TEAM_KEY = "gpu-portal/team"
OWNER_KEY = "gpu-portal/owner"
KIND_KEY = "gpu-portal/kind"

WORKLOAD_NAME = "sandbox"  # the StatefulSet and the Service in every sandbox namespace
POD_NAME = f"{WORKLOAD_NAME}-0"  # the StatefulSet's one pod
HOME_OWNER_KEY = "gpu-portal/home-of"  # on a home claim and its volume: whose home it is
ROLE_BINDING_NAME = "sandbox-owner"
NAMESPACE_PREFIX = "sbx"
DEPLOYMENT_HOST_PREFIX = "dep"  # a deployment's endpoint host: `dep-<team>-<name>-<id>.<domain>`

MAX_LABEL = 63
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def is_dns_label(name: str) -> bool:
    """Whether `name` is a DNS-1123 label (namespace names, most object names)."""
    return len(name) <= MAX_LABEL and bool(_DNS_LABEL.match(name))


def is_dns_subdomain(name: str) -> bool:
    """Whether `name` is a DNS-1123 subdomain (label key prefixes, ConfigMap names, nodes)."""
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def is_qualified_name(key: str) -> bool:
    """Whether `key` is a valid label key or resource name: `[prefix/]name`."""
    prefix, _, name = key.rpartition("/")
    if prefix and not is_dns_subdomain(prefix):
        return False
    return len(name) <= MAX_LABEL and bool(_LABEL_NAME.match(name))


def dns_label(text: str, max_length: int = MAX_LABEL) -> str:
    """`text` lowered to a DNS-1123 label fragment: ASCII letters and digits joined by dashes."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-")


def label_value(text: str) -> str:
    """`text` made a valid label value: other characters become `_`, cut to 63, ends alphanumeric.

    Label values are for selecting, not for reading back: keep the original in an annotation.
    """
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:MAX_LABEL]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)


def workload_namespace_name(team: str, name: str, workload_id: int, *, prefix: str = NAMESPACE_PREFIX) -> str:
    """The namespace of one workload: `sbx-<team>-<name>-<id>`, a DNS-1123 label of at most 63.

    Team and name are slugged and cut to fit; the id is never cut and ends the name after the last
    dash, so two sandboxes with different ids never share a namespace, and one id always maps to
    the same name. `prefix` names other labels built the same way (a deployment's endpoint host).
    """
    if workload_id < 0:
        raise ValueError(f"sandbox id must not be negative, got {workload_id}")
    suffix = str(workload_id)
    team_part = dns_label(team, 20)
    budget = MAX_LABEL - len(prefix) - len(suffix) - len(team_part) - 3
    name_part = dns_label(name, max(budget, 0))
    return "-".join(part for part in (prefix, team_part, name_part, suffix) if part)


def deployment_host_label(team: str, name: str, workload_id: int) -> str:
    """The first label of a deployment's endpoint host: `dep-<team>-<name>-<id>`. Only the host
    changes: the deployment still runs in its `sbx-...` namespace (cluster objects keep one naming)."""
    return workload_namespace_name(team, name, workload_id, prefix=DEPLOYMENT_HOST_PREFIX)


def mig_resource_name(profile: str) -> str:
    """The extended resource the device plugin advertises for a MIG profile (mixed strategy).

    Resource names may not hold `+`; the NVIDIA device plugin spells `1g.10gb+me` as `1g.10gb.me`.
    """
    return f"nvidia.com/mig-{profile.replace('+', '.')}"


def selector_labels(spec: WorkloadSpec) -> dict[str, str]:
    """The labels that pick the workload's pods (StatefulSet selector, Service, status lookups)."""
    return {NAME_KEY: WORKLOAD_NAME, SANDBOX_ID_KEY: str(spec.workload_id)}


def workload_labels(spec: WorkloadSpec) -> dict[str, str]:
    """Labels on every object of a workload: who manages it, which workload (and its kind), team
    and owner.

    Extra `spec.labels` come first so they can never override the portal's own keys.
    """
    labels: dict[str, str] = {}
    for key, value in spec.labels.items():
        if not is_qualified_name(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        labels[key] = label_value(value)
    labels.update(
        {
            MANAGED_BY_KEY: MANAGED_BY,
            KIND_KEY: "deployment" if spec.serving is not None else "sandbox",
            SANDBOX_ID_KEY: str(spec.workload_id),
            TEAM_KEY: label_value(spec.team),
            OWNER_KEY: label_value(spec.owner),
        }
    )
    return labels


def object_meta(spec: WorkloadSpec, name: str) -> dict:
    """`metadata` for a namespaced object of the sandbox."""
    return {"name": name, "namespace": spec.namespace, "labels": workload_labels(spec)}
