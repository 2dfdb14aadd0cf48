"""What the fake API server refuses, as a real one would: the official OpenAPI schema (strict,
via kubernetes-validate), object names, labels, quantities, and fields that may not change."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import referencing
from kubernetes_validate.utils import schema_contents

from tests.fakekube.resources import Resource

# The Kubernetes minor whose schema objects are checked against. kubernetes-validate 1.37.0 ships
# schemas for 1.25 to 1.37; 1.33 is the oldest minor the portal supports, so a field added later
# fails here instead of on an older cluster.
SCHEMA_VERSION = "1.33"
# resource.k8s.io/v1 (Dynamic Resource Allocation, GA) first exists in 1.34: the DRA path is
# checked against that minor, the oldest a cluster running NVIDIA's DRA driver can be.
DRA_SCHEMA_VERSION = "1.34"


def schema_version(api_version: str) -> str:
    return DRA_SCHEMA_VERSION if api_version.startswith("resource.k8s.io/") else SCHEMA_VERSION


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")

Cause = tuple[str, str]  # (field, message)


def is_dns_label(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS_LABEL.match(name))


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def is_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and not is_dns_subdomain(prefix):
        return False
    return len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


# Gateway API is a CRD, not in the official schema: HTTPRoutes are checked against the
# experimental-channel CRD of v1.4.0, the first release with the ExternalAuth filter
# (`schemas/`: its openAPIV3Schema for v1, descriptions taken out). CEL rules are not run.
GATEWAY_API_SCHEMA = Path(__file__).parent / "schemas" / "httproute-gateway-api-v1.4.0-experimental.json"


def _crd_validator(schema: dict) -> jsonschema.Validator:
    """A strict validator for a CRD's structural schema: unknown fields are refused, as the API
    server prunes or (with strict field validation) refuses them."""

    def strict(node: object) -> object:
        if isinstance(node, dict):
            node = {key: strict(value) for key, value in node.items() if not key.startswith("x-kubernetes-")}
            if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            return node
        if isinstance(node, list):
            return [strict(item) for item in node]
        return node

    structural = strict(schema)
    assert isinstance(structural, dict)
    # metadata is the API server's ObjectMeta, not described by the CRD
    structural["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(structural)


@lru_cache(maxsize=64)
def _validator(kind: str, api_version: str) -> jsonschema.Validator | None:
    """kubernetes-validate's strict schema for a kind, built once: `kubernetes_validate.validate`
    re-reads 1.4 MB of definitions on every call, which a server validating every request can't afford."""
    if (kind, api_version) == ("HTTPRoute", "gateway.networking.k8s.io/v1"):
        return _crd_validator(json.loads(GATEWAY_API_SCHEMA.read_text())["openAPIV3Schema"])
    version = schema_version(api_version)
    directory = f"kubernetes-json-schema/v{version}.0-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = schema_contents(f"{directory}/{kind.lower()}-{group_version}.json", version)
    except FileNotFoundError:
        return None
    definitions = schema_contents(f"{directory}/_definitions.json", version)
    registry = referencing.Resource.from_contents(definitions) @ (
        referencing.Resource.from_contents(schema) @ referencing.Registry()
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def schema_causes(obj: dict) -> list[Cause]:
    """Strict schema check: unknown fields, wrong types, missing required fields."""
    validator = _validator(str(obj.get("kind", "")), str(obj.get("apiVersion", "")))
    if validator is None:
        return [
            (
                "kind",
                f"no schema for {obj.get('apiVersion')} {obj.get('kind')} in Kubernetes"
                f" {schema_version(str(obj.get('apiVersion', '')))}",
            )
        ]
    error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if error is not None:
        return [(".".join(str(part) for part in error.path) or "<root>", error.message)]
    return []


def _name_causes(obj: dict, resource: Resource) -> list[Cause]:
    name = obj.get("metadata", {}).get("name", "")
    if not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    if resource.kind in ("Namespace",):
        ok, rule = is_dns_label(name), "a lowercase RFC 1123 label"
    elif resource.kind == "Service":
        ok, rule = len(name) <= 63 and bool(_DNS_1035.match(name)), "a DNS-1035 label"
    else:
        ok, rule = is_dns_subdomain(name), "a lowercase RFC 1123 subdomain"
    return [] if ok else [("metadata.name", f'Invalid value: "{name}": must be {rule}')]


def _label_causes(obj: dict) -> list[Cause]:
    causes = []
    metadata = obj.get("metadata", {})
    for key, value in (metadata.get("labels") or {}).items():
        if not is_qualified_name(key):
            causes.append((f"metadata.labels[{key}]", f'Invalid value: "{key}": not a qualified name'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append((f"metadata.labels[{key}]", f'Invalid value: "{value}": not a valid label value'))
    for key in metadata.get("annotations") or {}:
        if not is_qualified_name(key):
            causes.append((f"metadata.annotations[{key}]", f'Invalid value: "{key}": not a qualified name'))
    return causes


def _quantity_maps(obj: dict) -> list[tuple[str, dict]]:
    """Every map of resource name -> quantity in the object, with its field path."""
    spec = obj.get("spec") or {}
    found: list[tuple[str, dict]] = []
    if obj.get("kind") == "ResourceQuota":
        found.append(("spec.hard", spec.get("hard") or {}))
    if obj.get("kind") == "LimitRange":
        for i, item in enumerate(spec.get("limits") or []):
            for key in ("default", "defaultRequest", "max", "min"):
                found.append((f"spec.limits[{i}].{key}", item.get(key) or {}))
    pod_spec = (
        spec.get("template", {}).get("spec") if obj.get("kind") in ("StatefulSet", "Deployment") else spec
    )
    for i, container in enumerate((pod_spec or {}).get("containers") or []):
        for key in ("requests", "limits"):
            found.append(
                (f"containers[{i}].resources.{key}", (container.get("resources") or {}).get(key) or {})
            )
    return found


def _quantity_causes(obj: dict) -> list[Cause]:
    causes = []
    for path, amounts in _quantity_maps(obj):
        for resource_name, amount in amounts.items():
            if not is_qualified_name(resource_name):
                causes.append((f"{path}[{resource_name}]", "Invalid value: not a valid resource name"))
            if not QUANTITY.match(str(amount)):
                causes.append(
                    (f"{path}[{resource_name}]", f'Invalid value: "{amount}": quantities must match')
                )
    for i, container in enumerate(_containers(obj)):
        resources = container.get("resources") or {}
        for resource_name, limit in (resources.get("limits") or {}).items():
            request = (resources.get("requests") or {}).get(resource_name)
            if "/" in resource_name and request is not None and str(request) != str(limit):
                causes.append(
                    (
                        f"containers[{i}].resources.requests[{resource_name}]",
                        "Invalid value: must be equal to limit",
                    )
                )
    return causes


def _containers(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    if obj.get("kind") in ("StatefulSet", "Deployment"):
        spec = spec.get("template", {}).get("spec") or {}
    return (
        list(spec.get("containers") or []) if obj.get("kind") in ("Pod", "StatefulSet", "Deployment") else []
    )


def object_causes(obj: dict, resource: Resource) -> list[Cause]:
    """Everything wrong with an object a client sent (empty when a real server would take it)."""
    if obj.get("apiVersion") != resource.api_version or obj.get("kind") != resource.kind:
        return [("kind", f"expected {resource.api_version} {resource.kind}")]
    return schema_causes(obj) + _name_causes(obj, resource) + _label_causes(obj) + _quantity_causes(obj)


_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def update_causes(old: dict, new: dict, resource: Resource) -> list[Cause]:
    """Fields a real API server refuses to change on update."""
    if resource.kind == "StatefulSet":
        frozen_old = {k: v for k, v in (old.get("spec") or {}).items() if k not in _STATEFULSET_MUTABLE}
        frozen_new = {k: v for k, v in (new.get("spec") or {}).items() if k not in _STATEFULSET_MUTABLE}
        if frozen_old != frozen_new:
            return [
                (
                    "spec",
                    "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                    "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                    "'minReadySeconds' are forbidden",
                )
            ]
    if resource.kind == "PersistentVolumeClaim":
        keep = ("resources", "volumeName")  # volumeName: the binder fills it in on a claim that named none
        frozen_old = {k: v for k, v in (old.get("spec") or {}).items() if k not in keep}
        frozen_new = {k: v for k, v in (new.get("spec") or {}).items() if k not in keep}
        named = (new.get("spec") or {}).get("volumeName")
        if frozen_old != frozen_new or (named and named != (old.get("spec") or {}).get("volumeName")):
            return [("spec", "Forbidden: spec is immutable after creation except resources.requests")]
    if resource.kind == "RoleBinding" and old.get("roleRef") != new.get("roleRef"):
        return [("roleRef", "Invalid value: cannot change roleRef")]
    if resource.kind == "Pod":
        strip = [{**c, "image": ""} for c in (old.get("spec") or {}).get("containers") or []]
        strip_new = [{**c, "image": ""} for c in (new.get("spec") or {}).get("containers") or []]
        rest_old = {k: v for k, v in (old.get("spec") or {}).items() if k != "containers"}
        rest_new = {k: v for k, v in (new.get("spec") or {}).items() if k != "containers"}
        if strip != strip_new or rest_old != rest_new:
            return [("spec", "Forbidden: pod updates may not change fields other than container images")]
    return []
