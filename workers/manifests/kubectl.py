"""kubectl access to a sandbox: a ServiceAccount of its own namespace, bound to what using a
sandbox needs (ClusterRole `gpu-portal-sandbox-user`: its pod, logs, exec, port-forward), whose
short-lived tokens (TokenRequest) the portal hands its owner in a kubeconfig. The tokens die
with the ServiceAccount when the sandbox's namespace goes, and expire on their own before that."""

from __future__ import annotations

from workers.manifests.names import object_meta
from workers.manifests.namespace import RBAC_GROUP
from workers.manifests.options import ManifestOptions
from workers.spec import WorkloadSpec

KUBECTL_ACCOUNT = "sandbox-user"
KUBECTL_BINDING = "sandbox-kubectl"


def kubectl_objects(spec: WorkloadSpec, options: ManifestOptions) -> list[dict]:
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": object_meta(spec, KUBECTL_ACCOUNT),
        "automountServiceAccountToken": False,  # its tokens are for people, never for pods
    }
    binding = {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(spec, KUBECTL_BINDING),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": options.user_cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": KUBECTL_ACCOUNT, "namespace": spec.namespace}],
    }
    return [account, binding]
