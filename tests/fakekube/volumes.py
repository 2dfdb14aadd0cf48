"""The persistent volume binder and expander, as the fake plays them.

A claim naming a volume binds to it when the volume's claimRef names that claim, or nothing,
and it has room. A claim naming none gets a new volume from the default StorageClass (reclaim
policy Delete, as provisioners default). Claims deleted with their namespace release their
volumes (Retain: Released, claimRef kept) or delete them (Delete). A bound claim asking for more
storage grows its volume at once. A Released volume whose claimRef is pointed at a new claim
(no uid) is Available to that claim. Shrinking a claim is refused, as the API server does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.fakekube.admission import quantity
from tests.fakekube.errors import ApiError

if TYPE_CHECKING:
    from tests.fakekube.api import FakeApi

PV = "persistentvolumes"
PVC = "persistentvolumeclaims"


def _request(claim: dict) -> str:
    return str(claim["spec"]["resources"]["requests"]["storage"])


def bind_claim(api: FakeApi, claim: dict) -> None:
    """Bind a new claim to its named volume, or provision one for it."""
    metadata, spec = claim["metadata"], claim["spec"]
    namespace, name = metadata["namespace"], metadata["name"]
    volume_name = spec.get("volumeName") or ""
    if volume_name:
        volume = api.store.get((PV, "", volume_name))
        if volume is None:
            return  # Pending: no such volume (yet)
        ref = volume["spec"].get("claimRef") or {}
        if ref and ((ref.get("namespace"), ref.get("name")) != (namespace, name) or ref.get("uid")):
            return  # Pending: the volume is someone else's, or still its last claim's
        if quantity(volume["spec"]["capacity"]["storage"]) < quantity(_request(claim)):
            return  # Pending: too small
    else:
        volume_name = f"pvc-{metadata['uid']}"
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume_name, "labels": {}},
            "spec": {
                "capacity": {"storage": _request(claim)},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": spec.get("storageClassName") or "standard",
                "csi": {"driver": "fake.csi.example", "volumeHandle": volume_name},
            },
        }
        api.store.stamp_new(volume)
    volume["spec"]["claimRef"] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": namespace,
        "name": name,
        "uid": metadata["uid"],
    }
    volume["status"] = {"phase": "Bound"}
    api.store.put((PV, "", volume_name), volume)
    claim["spec"]["volumeName"] = volume_name
    claim["status"] = {
        "phase": "Bound",
        "accessModes": volume["spec"]["accessModes"],
        "capacity": {"storage": volume["spec"]["capacity"]["storage"]},
    }
    api.store.put((PVC, namespace, name), claim)


def resize_claim(api: FakeApi, old: dict, new: dict) -> None:
    """Refuse a shrink; grow a bound claim's volume to what it now asks."""
    before, after = quantity(_request(old)), quantity(_request(new))
    if after < before:
        raise ApiError(422, "Invalid", f'PersistentVolumeClaim "{new["metadata"]["name"]}" is invalid: '
                       "spec.resources.requests.storage: Forbidden: field can not be less than previous value")  # fmt: skip
    status = old.get("status") or {}
    new["status"] = status
    volume_name = new["spec"].get("volumeName")
    if status.get("phase") != "Bound" or not volume_name or after <= before:
        return
    volume = api.store.get((PV, "", volume_name))
    if volume is not None:
        volume["spec"]["capacity"]["storage"] = _request(new)
        api.store.put((PV, "", volume_name), volume)
    new["status"] = {**status, "capacity": {"storage": _request(new)}}


def release_volumes(api: FakeApi, namespace: str) -> None:
    """The namespace's claims are gone: their volumes are Released (Retain) or deleted (Delete)."""
    for volume in api.store.list(PV, ""):
        ref = volume["spec"].get("claimRef") or {}
        if ref.get("namespace") != namespace or not ref.get("uid"):
            continue
        if volume["spec"].get("persistentVolumeReclaimPolicy") == "Retain":
            volume["status"] = {"phase": "Released"}
            api.store.put((PV, "", volume["metadata"]["name"]), volume)
        else:
            api.store.delete((PV, "", volume["metadata"]["name"]))


def volume_changed(api: FakeApi, volume: dict) -> None:
    """A claimRef pointed at a claim with no uid makes the volume Available to it (and binds a
    claim of that name that waits for it)."""
    ref = volume["spec"].get("claimRef") or {}
    if ref and not ref.get("uid"):
        volume["status"] = {"phase": "Available"}
        claim = api.store.get((PVC, ref.get("namespace", ""), ref.get("name", "")))
        if claim is not None and (claim.get("status") or {}).get("phase") != "Bound":
            bind_claim(api, claim)
