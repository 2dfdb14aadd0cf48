"""The controllers the fake runs inline: the StatefulSet controller (replica 0 and its claims), the
Deployment controller (its ReplicaSet's pods, folded into one step), garbage collection of their
pods, and events, as kubelets, schedulers and controllers record them."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from tests.fakekube.errors import ApiError
from tests.fakekube.resources import BY_KIND

if TYPE_CHECKING:
    from tests.fakekube.api import FakeApi


def collect_owned(api: FakeApi, namespace: str, owner_uid: str) -> None:
    """Garbage-collect the pods a deleted StatefulSet owned."""
    for pod in api.store.list("pods", namespace):
        if any(ref.get("uid") == owner_uid for ref in pod["metadata"].get("ownerReferences") or []):
            api.store.delete(("pods", namespace, pod["metadata"]["name"]))


def start_stateful_set(api: FakeApi, stateful_set: dict) -> None:
    """Create replica 0 and its claims from the template, as the controller would (again when
    the pod was deleted, keeping its claims); a pod the template makes invalid becomes a
    FailedCreate event instead."""
    metadata, spec = stateful_set["metadata"], stateful_set["spec"]
    namespace, set_name = metadata["namespace"], metadata["name"]
    pod_name = f"{set_name}-0"
    template = copy.deepcopy(spec["template"])
    claims = []
    for claim_template in spec.get("volumeClaimTemplates") or []:
        claim_name = f"{claim_template['metadata']['name']}-{pod_name}"
        template["spec"].setdefault("volumes", []).append(
            {
                "name": claim_template["metadata"]["name"],
                "persistentVolumeClaim": {"claimName": claim_name},
            }
        )
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {**copy.deepcopy(claim_template["metadata"]), "name": claim_name},
                "spec": copy.deepcopy(claim_template["spec"]),
            }
        )
    pod_labels = {
        **template["metadata"].get("labels", {}),
        "statefulset.kubernetes.io/pod-name": pod_name,
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "labels": pod_labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": set_name,
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**template["spec"], "hostname": pod_name, "subdomain": spec["serviceName"]},
    }
    for claim in claims:  # a claim outlives its pod: a pod made again finds it there
        if api.store.get(("persistentvolumeclaims", namespace, claim["metadata"]["name"])) is None:
            api.create(BY_KIND["PersistentVolumeClaim"], namespace, claim)
    if not _create_pod(api, namespace, "StatefulSet", set_name, pod):
        return
    add_event(api, namespace, "StatefulSet", set_name, "SuccessfulCreate", f"create Pod {pod_name} success")
    _set_status(
        api,
        ("statefulsets", namespace, set_name),
        {"replicas": 1, "currentReplicas": 1, "observedGeneration": 1},
    )


def _create_pod(api: FakeApi, namespace: str, owner_kind: str, owner_name: str, pod: dict) -> bool:
    """Create a controller's pod; a pod the API refuses becomes a FailedCreate event on its owner."""
    try:
        api.create(BY_KIND["Pod"], namespace, pod)
    except ApiError as exc:
        message = f"create Pod {pod['metadata']['name']} failed: {exc}"
        add_event(api, namespace, owner_kind, owner_name, "FailedCreate", message, "Warning")
        return False
    return True


def _set_status(api: FakeApi, key: tuple[str, str, str], status: dict) -> None:
    stored = api.store.get(key)
    if stored is not None:
        stored["status"] = status
        api.store.put(key, stored)


def add_event(
    api: FakeApi, namespace: str, kind: str, name: str, reason: str, message: str, event_type: str = "Normal"
) -> dict:
    """Record an Event about an object, as kubelets, schedulers and controllers do."""
    when = api.store.now()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{api.store.next_version()}", "namespace": namespace},
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": event_type,
        "count": 1,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "source": {"component": "fake-kube"},
    }
    return api.create(BY_KIND["Event"], namespace, event)


def start_deployment(api: FakeApi, deployment: dict) -> None:
    """Create the Deployment's pods from its template, as its ReplicaSet would (named
    `<deployment>-<template hash>-<suffix>`, owned by the Deployment here); a pod the template
    makes invalid becomes a FailedCreate event instead."""
    metadata, spec = deployment["metadata"], deployment["spec"]
    namespace, name = metadata["namespace"], metadata["name"]
    template = copy.deepcopy(spec["template"])
    for index in range(int(spec.get("replicas", 1))):
        pod_name = f"{name}-5d8f7c9b4-{index:05d}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "labels": {**template["metadata"].get("labels", {}), "pod-template-hash": "5d8f7c9b4"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": name,
                        "uid": metadata["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": copy.deepcopy(template["spec"]),
        }
        if not _create_pod(api, namespace, "Deployment", name, pod):
            return
    _set_status(
        api,
        ("deployments", namespace, name),
        {"replicas": int(spec.get("replicas", 1)), "observedGeneration": 1},
    )
