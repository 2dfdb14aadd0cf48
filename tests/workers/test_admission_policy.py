"""deploy/kubernetes/admission-policy.yaml, evaluated as the API server would on sample requests
(its CEL through cel-python): the portal may write only in namespaces it labelled as its own,
create and delete only such namespaces, and change only the MIG manager's labels on nodes."""

from __future__ import annotations

from pathlib import Path

import celpy
import kubernetes_validate
import pytest
import yaml

from tests.fakekube import SCHEMA_VERSION

POLICY_FILE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "admission-policy.yaml"
DOCUMENTS = [doc for doc in yaml.safe_load_all(POLICY_FILE.read_text()) if doc]
POLICY = next(doc for doc in DOCUMENTS if doc["kind"] == "ValidatingAdmissionPolicy")
PORTAL = "system:serviceaccount:gpu-portal:gpu-portal"
OURS = {"metadata": {"name": "sbx-vision-a-1", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}}}
THEIRS = {"metadata": {"name": "kube-system", "labels": {"kubernetes.io/metadata.name": "kube-system"}}}


def _program(expression: str):
    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def allowed(
    *, resource: str, operation: str = "CREATE", user: str = PORTAL, obj=None, old=None, namespace=None
) -> bool:
    """Whether the policy admits the request (its match condition, then every validation)."""
    activation = {
        "request": celpy.json_to_cel(
            {"userInfo": {"username": user}, "operation": operation, "resource": {"resource": resource}}
        ),
        "object": celpy.json_to_cel(obj) if obj is not None else None,
        "oldObject": celpy.json_to_cel(old) if old is not None else None,
        "namespaceObject": celpy.json_to_cel(namespace) if namespace is not None else None,
    }
    for condition in POLICY["spec"]["matchConditions"]:
        if not _program(condition["expression"]).evaluate(activation):
            return True  # not the portal: the policy does not apply
    return all(bool(_program(v["expression"]).evaluate(activation)) for v in POLICY["spec"]["validations"])


def test_the_policy_and_its_binding_pass_the_strict_official_schema() -> None:
    for doc in DOCUMENTS:
        assert kubernetes_validate.validate(doc, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    binding = next(doc for doc in DOCUMENTS if doc["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": POLICY["metadata"]["name"], "validationActions": ["Deny"]}


def test_the_portal_writes_in_its_own_namespaces_only() -> None:
    quota = {"metadata": {"name": "sandbox-quota"}}
    assert allowed(resource="resourcequotas", obj=quota, namespace=OURS)
    assert not allowed(resource="rolebindings", obj={"metadata": {"name": "x"}}, namespace=THEIRS)
    assert not allowed(
        resource="deployments", operation="DELETE", old={"metadata": {"name": "coredns"}}, namespace=THEIRS
    )
    # a restart deletes the sandbox's pod: in its own namespace only, and routes likewise
    pod = {"metadata": {"name": "sandbox-0"}}
    assert allowed(resource="pods", operation="DELETE", old=pod, namespace=OURS)
    assert not allowed(
        resource="pods", operation="DELETE", old={"metadata": {"name": "etcd-0"}}, namespace=THEIRS
    )
    assert not allowed(resource="ingresses", obj={"metadata": {"name": "sandbox"}}, namespace=THEIRS)
    rules = {(tuple(rule["apiGroups"]), resource) for rule in POLICY["spec"]["matchConstraints"]["resourceRules"]
             for resource in rule["resources"]}  # fmt: skip
    assert {
        (("",), "pods"),
        (("networking.k8s.io",), "ingresses"),
        (("gateway.networking.k8s.io",), "httproutes"),
    } <= rules


def test_the_portal_makes_and_deletes_only_namespaces_labelled_as_its_own() -> None:
    assert allowed(resource="namespaces", obj=OURS)
    assert not allowed(resource="namespaces", obj={"metadata": {"name": "sneaky"}})
    assert allowed(resource="namespaces", operation="DELETE", old=OURS)
    assert not allowed(resource="namespaces", operation="DELETE", old=THEIRS)


NODE = {
    "metadata": {
        "name": "gpu-h100-b",
        "labels": {"nvidia.com/gpu.product": "H100", "nvidia.com/mig.config": "a"},
    },
    "spec": {"taints": []},
}


def node_with(labels: dict, spec: dict | None = None) -> dict:
    return {"metadata": {"name": "gpu-h100-b", "labels": labels}, "spec": spec or {"taints": []}}


@pytest.mark.parametrize(
    ("labels", "spec", "expected"),
    [
        ({**NODE["metadata"]["labels"], "nvidia.com/mig.config": "b", "nvidia.com/mig.config.state": "pending"}, None, True),
        ({**NODE["metadata"]["labels"], "nvidia.com/gpu.deploy.device-plugin": "false"}, None, False),
        ({"nvidia.com/mig.config": "a"}, None, False),  # a label removed
        (NODE["metadata"]["labels"], {"unschedulable": True}, False),  # cordoning is not the portal's
    ],
)  # fmt: skip
def test_on_nodes_only_the_mig_managers_labels_change(
    labels: dict, spec: dict | None, expected: bool
) -> None:
    assert allowed(resource="nodes", operation="UPDATE", obj=node_with(labels, spec), old=NODE) is expected


def test_anyone_else_is_left_to_rbac() -> None:
    assert allowed(resource="namespaces", operation="DELETE", old=THEIRS, user="kubernetes-admin")


def test_the_portal_may_not_claim_a_namespace_nor_loosen_its_pod_security() -> None:
    claimed = {"metadata": {"name": "kube-system", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}}}
    assert not allowed(resource="namespaces", operation="UPDATE", obj=claimed, old=THEIRS)
    strict = {
        "metadata": {
            "name": "sbx",
            "labels": {**OURS["metadata"]["labels"], "pod-security.kubernetes.io/enforce": "restricted"},
        }
    }
    loose = {
        "metadata": {
            "name": "sbx",
            "labels": {**OURS["metadata"]["labels"], "pod-security.kubernetes.io/enforce": "privileged"},
        }
    }
    assert not allowed(resource="namespaces", operation="UPDATE", obj=loose, old=strict)
    assert allowed(resource="namespaces", operation="UPDATE", obj=strict, old=strict)


def test_the_portal_touches_only_the_volumes_of_its_sandboxes_homes() -> None:
    home = {
        "metadata": {"name": "pvc-1", "labels": {"app.kubernetes.io/managed-by": "gpu-portal"}},
        "spec": {},
    }
    first = {
        "metadata": {"name": "pvc-2"},
        "spec": {"claimRef": {"namespace": "sbx-vision-a-1", "name": "home"}},
    }
    database = {
        "metadata": {"name": "pvc-3"},
        "spec": {"claimRef": {"namespace": "gpu-portal", "name": "pg"}},
    }
    assert allowed(resource="persistentvolumes", operation="UPDATE", obj=home, old=home)
    assert allowed(resource="persistentvolumes", operation="UPDATE", obj=first, old=first)  # labels it
    assert allowed(resource="persistentvolumes", operation="DELETE", old=home)
    assert not allowed(resource="persistentvolumes", operation="DELETE", old=database)
    assert not allowed(resource="persistentvolumes", operation="UPDATE", obj=database, old=database)
    copy = {
        **home,
        "spec": {
            "claimRef": {"namespace": "sbx-vision-a-1", "name": "dataset-imagenet"},
            "csi": {"driver": "x"},
        },
    }
    root = {**copy, "spec": {"claimRef": copy["spec"]["claimRef"], "hostPath": {"path": "/"}}}
    assert not allowed(
        resource="persistentvolumes", operation="CREATE", obj=root
    )  # no way round Pod Security
    assert allowed(resource="persistentvolumes", operation="CREATE", obj=copy)  # a dataset's read-only copy
    assert not allowed(
        resource="persistentvolumes", operation="CREATE", obj={**copy, "metadata": {"name": "x"}}
    )
    assert not allowed(
        resource="persistentvolumes", operation="CREATE", obj={**home, "spec": database["spec"]}
    )
