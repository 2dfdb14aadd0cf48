"""Truth over bookkeeping: the portal's records of a node's MIG slices and of which workload holds
which device, corrected to what its node agent reads (NVML's MIG devices, the kubelet's
PodResources mapping).

Under the device plugin the kubelet picks the device a pod gets, and discovery can only guess
which GPU holds which of a node's slices, so the records may disagree with the node. On each
fresh reading, where the node's layout is settled (no change in flight):

- a holder whose pod sits on another device of its kind moves to that device's record;
- a MIG device the GPU has and the records lack is recorded (free, or held as above);
- a record of a slice the GPU does not have is dropped when nobody holds it;
- what cannot be corrected (a held record with no such device and no pod seen elsewhere, a
  device in use by a pod the portal did not place) is kept as the GPU's `mismatch`, shown on the
  fleet page; admins are told once when it appears.

Corrections are audited (`fleet.corrected`) and stamped on the GPU. On "dynamic" (DRA) clusters
slices exist only while claimed and follow the claims' status; there only mismatches are noted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from portal.accounts.selectors import platform_admins
from portal.accounts.services import notify
from portal.audit.services import audit_record
from portal.fleet.models import Allocation, Gpu, GpuType, MigSlice, Node, dynamic_mig_q
from portal.fleet.services import mig_layout_changed

FRESH = timedelta(minutes=2)  # an older reading (an agent's backlog) may predate the records


@dataclass(frozen=True)
class Device:
    gpu_id: int
    uuid: str
    profile: str  # "" for a whole GPU
    start: int | None
    size: int
    namespaces: frozenset[str] | None  # None: the agent could not tell who holds it
    pods: tuple[str, ...] = ()


@dataclass
class _Plan:
    moves: list[tuple[Allocation, Device]] = field(default_factory=list)
    drops: list[MigSlice] = field(default_factory=list)
    adds: list[Device] = field(default_factory=list)
    notes: dict[int, list[str]] = field(default_factory=dict)  # GPU -> corrections
    mismatches: dict[int, list[str]] = field(default_factory=dict)  # GPU -> what stays wrong
    judged: set[int] = field(default_factory=set)  # GPUs read cleanly with their layout settled

    def note(self, gpu_id: int, text: str) -> None:
        self.notes.setdefault(gpu_id, []).append(text)

    def mismatch(self, gpu_id: int, text: str) -> None:
        self.mismatches.setdefault(gpu_id, []).append(text)

    @property
    def changes(self) -> bool:
        return bool(self.moves or self.drops or self.adds)


def _holders(item: dict) -> tuple[frozenset[str] | None, tuple[str, ...]]:
    pods = item.get("pods")
    if not isinstance(pods, list):
        return None, ()  # the agent could not tell
    pods = [p for p in pods if isinstance(p, dict)]
    return frozenset(str(p.get("namespace", "")) for p in pods), tuple(
        f"{p.get('namespace')}/{p.get('pod')}" for p in pods
    )


def _mig_device(gpu: Gpu, mig: dict) -> Device:
    """One MIG device as the agent read it; KeyError, TypeError or ValueError when malformed."""
    start, size, profile = mig["start"], mig["size"], mig["profile"]
    if not (isinstance(start, int) and isinstance(size, int) and isinstance(profile, str)):
        raise TypeError("start, size and profile")
    if not (0 <= start < 8 and 1 <= size <= 8 and start + size <= 8 and 0 < len(profile) <= 30):
        raise ValueError("a placement no GPU has")
    return Device(gpu.pk, str(mig["uuid"]), profile, start, size, *_holders(mig))


def _devices(reading: dict, gpus: dict[str, Gpu]) -> tuple[list[Device], set[int]]:
    """The devices the reading shows, and the GPUs it read cleanly. A GPU whose MIG mode NVML
    could not tell, or one device of which is malformed, is not clean and brings no device:
    nothing is corrected on a guess."""
    found, clean = [], set()
    items = reading.get("gpus")
    for item in items if isinstance(items, list) else []:
        gpu = gpus.get(str(item.get("uuid", ""))) if isinstance(item, dict) else None
        if gpu is None or item.get("error") or not isinstance(item.get("mig_enabled"), bool):
            continue
        try:
            if item["mig_enabled"]:
                migs = item.get("mig_devices")
                mine = [_mig_device(gpu, mig) for mig in (migs if isinstance(migs, list) else [None])]
            else:
                mine = [Device(gpu.pk, str(item.get("uuid", "")), "", None, 0, *_holders(item))]
        except (KeyError, TypeError, ValueError):
            continue
        found.extend(mine)
        clean.add(gpu.pk)
    return found, clean


def _assign(
    holders: list[Allocation], devices: list[Device], at: dict[int, Device | None], plan: _Plan
) -> None:
    """Holders of one namespace and kind, over the devices their pods sit on: a holder already on
    one of them keeps it, the others take the rest in order."""
    taken = {id(at[h.pk]) for h in holders if at[h.pk] in devices}
    spare = [d for d in devices if id(d) not in taken]
    for holder in holders:
        if at[holder.pk] in devices or not spare:
            continue
        device = spare.pop(0)
        plan.moves.append((holder, device))
        at[holder.pk] = device


def _slices(
    plan: _Plan,
    holds: list[Allocation],
    records: list[MigSlice],
    devices: list[Device],
    at: dict[int, Device | None],
    settled: set[int],
    by_id: dict[int, Gpu],
    dynamic: bool,
) -> tuple[list[MigSlice], list[Device], dict[Device, str]]:
    """With the moves planned: the records to drop, the devices to record, and what cannot be
    corrected (a device keyed to why; a held record the GPU lacks is keyed to a stand-in)."""
    moving = {hold.pk for hold, _ in plan.moves}
    staying = {at[h.pk].uuid for h in holds if h.pk not in moving and at[h.pk] is not None}
    mismatches: dict[Device, str] = {}
    for hold, device in plan.moves:
        if device.uuid in staying:
            mismatches[device] = (
                f"{hold.workload}'s pod is on {device.uuid}, which the records give to another"
            )
    held = {h.mig_slice_id for h in holds if h.mig_slice_id and h.pk not in moving}
    dropped, added = [], []
    for gpu_id in sorted(settled):
        if not by_id[gpu_id].mig_enabled:
            continue
        mine = [d for d in devices if d.gpu_id == gpu_id and d.profile]
        matches = {(d.start, d.profile) for d in mine}
        kept = []
        for record in (r for r in records if r.gpu_id == gpu_id):
            if (record.start, record.profile) in matches:
                kept.append(record)
            elif record.pk in held:
                kept.append(record)
                stand_in = Device(
                    gpu_id, f"record {record.pk}", record.profile, record.start, record.size, None
                )
                mismatches[stand_in] = (
                    f"records hold {record.profile}@{record.start}, which the GPU does not have"
                )
            elif not dynamic:
                dropped.append(record)
        if dynamic:
            continue
        for device in mine:
            if any(r.start == device.start and r.profile == device.profile for r in kept):
                continue
            if any(r.start < device.start + device.size and device.start < r.start + r.size for r in kept):
                mismatches[device] = (
                    f"the GPU has {device.profile}@{device.start} where the records hold another"
                )
            else:
                added.append(device)
    return dropped, added, mismatches


def _dynamic(node: Node) -> bool:
    return Node.objects.filter(dynamic_mig_q("cluster"), pk=node.pk).exists()


def _plan(node: Node, reading: dict) -> _Plan:
    plan = _Plan()
    gpus = {gpu.uuid: gpu for gpu in node.gpus.all()}
    by_id = {gpu.pk: gpu for gpu in gpus.values()}
    devices, clean = _devices(reading, gpus)
    dynamic = _dynamic(node)
    records = list(MigSlice.objects.filter(gpu__node=node))
    unsettled = {s.gpu_id for s in records if s.state == MigSlice.State.CREATING}
    if node.mig_layout_wanted != node.mig_layout_applied:
        unsettled |= set(by_id)  # a layout change is in flight: the node may not show it yet
    holds = list(
        Allocation.objects.filter(gpu__node=node, released_at__isnull=True).select_related("workload")
    )
    slice_of = {s.pk: s for s in records}
    # where each hold stands in the node's devices (None: no device matches its record)
    at: dict[int, Device | None] = {}
    for hold in holds:
        if hold.mig_slice_id:
            record = slice_of.get(hold.mig_slice_id)
            at[hold.pk] = next(
                (d for d in devices if record and d.gpu_id == hold.gpu_id and d.start == record.start
                 and d.profile == record.profile), None,
            )  # fmt: skip
        else:
            at[hold.pk] = next((d for d in devices if d.gpu_id == hold.gpu_id and not d.profile), None)

    plan.judged = clean - unsettled
    items = reading.get("gpus")
    for item in items if isinstance(items, list) else []:
        gpu = gpus.get(str(item.get("uuid", ""))) if isinstance(item, dict) else None
        mode = item.get("mig_enabled") if gpu is not None else None
        if mode is not None and gpu.pk in clean - unsettled and bool(mode) != gpu.mig_enabled:
            plan.mismatch(
                gpu.pk, f"MIG mode is {'on' if mode else 'off'} on the GPU; the records say otherwise"
            )
            clean.discard(gpu.pk)
    origin = dict(at)
    # holders to the devices their pods sit on (only where the agent knew who holds what)
    groups: dict[tuple[str, str], list[Allocation]] = {}
    for hold in holds:
        namespace = hold.workload.namespace if hold.workload else ""
        if namespace and hold.gpu_id in clean and hold.gpu_id not in unsettled and not dynamic:
            groups.setdefault((namespace, hold.mig_profile), []).append(hold)
    for (namespace, profile), members in groups.items():
        theirs = [
            d for d in devices
            if d.namespaces and namespace in d.namespaces and d.profile == profile
            and d.gpu_id in clean and d.gpu_id not in unsettled
        ]  # fmt: skip
        _assign(sorted(members, key=lambda h: (h.replica, h.pk)), theirs, at, plan)
    while True:  # until the moves and the records they leave agree
        dropped, added, mismatches = _slices(
            plan, holds, records, devices, at, clean - unsettled, by_id, dynamic
        )
        blocked = {id(d) for d in mismatches}
        kept = [(h, d) for h, d in plan.moves if id(d) not in blocked]
        if len(kept) == len(plan.moves):
            break
        for hold, device in plan.moves:
            if id(device) in blocked:
                at[hold.pk] = origin[hold.pk]  # it stays on its record
        plan.moves = kept
    plan.drops, plan.adds = dropped, added
    for device, text in mismatches.items():
        plan.mismatch(device.gpu_id, text)
    for hold, device in plan.moves:
        where = f"{device.profile}@{device.start}" if device.profile else "the whole GPU"
        plan.note(device.gpu_id, f"{hold.workload} holds {where} here (its pod's device), not {hold.gpu}")
    for record in plan.drops:
        plan.note(record.gpu_id, f"dropped {record.profile}@{record.start}: the GPU does not have it")
    for device in plan.adds:
        plan.note(device.gpu_id, f"recorded {device.profile}@{device.start}, which the GPU has")
    # devices in use by pods the portal did not place there
    portal_namespaces = {h.workload.namespace for h in holds if h.workload and h.workload.namespace}
    for device in devices:
        if device.gpu_id in unsettled or not device.namespaces:
            continue
        strangers = device.namespaces - portal_namespaces
        if strangers and not any(at[h.pk] is device for h in holds):
            where = f"{device.profile}@{device.start}" if device.profile else "whole GPU"
            plan.mismatch(
                device.gpu_id, f"{where} in use by {', '.join(device.pods)}, not placed by the portal"
            )
    return plan


def _apply(node: Node, plan: _Plan, now: datetime) -> None:
    records: dict[str, MigSlice] = {}
    MigSlice.objects.filter(pk__in=[r.pk for r in plan.drops]).delete()
    gpu_type = node.gpu_type
    model = gpu_type.model if gpu_type else None
    for device in plan.adds:
        shape = model.profile(device.profile) if model else None
        records[device.uuid] = MigSlice.objects.create(
            gpu_id=device.gpu_id,
            profile=device.profile,
            start=device.start or 0,
            size=device.size or (shape.size if shape else 1),
            compute_slices=shape.compute_slices if shape else 1,
        )
    if plan.moves:
        # lifted first, so a swap of two holders never meets the one-live-hold constraints
        Allocation.objects.filter(pk__in=[hold.pk for hold, _ in plan.moves]).update(released_at=now)
    for hold, device in plan.moves:
        record = None
        if device.profile:
            record = records.get(device.uuid) or MigSlice.objects.get(
                gpu_id=device.gpu_id, start=device.start
            )
        Allocation.objects.filter(pk=hold.pk).update(gpu_id=device.gpu_id, mig_slice=record, released_at=None)


def fleet_reconcile_node(*, node: Node, reading: dict, now: datetime | None = None) -> bool:
    """Correct the records of `node` to its agent's `reading` (a dict as the agent posts it);
    True when anything was corrected. Call within a transaction."""
    now = now or timezone.now()
    taken = reading.get("taken_at")
    if not isinstance(taken, int | float) or abs(now.timestamp() - float(taken)) > FRESH.total_seconds():
        return False  # an agent's backlog, or a clock that is off: the records may be newer
    plan = _plan(node, reading)
    if plan.changes:
        # placement's lock, then a fresh look: nothing is placed or released on the node meanwhile
        GpuType.objects.select_for_update().filter(pk=node.gpu_type_id).first()
        node = Node.objects.select_for_update().prefetch_related("gpus").get(pk=node.pk)
        plan = _plan(node, reading)
        _apply(node, plan, now)
        if (plan.adds or plan.drops) and node.mig_managed and not _dynamic(node):
            mig_layout_changed(node_ids=[node.pk])  # the node's config says what the GPUs have
    _record(node, plan, now)
    return plan.changes


def _record(node: Node, plan: _Plan, now: datetime) -> None:
    admins = None
    for gpu in node.gpus.all():
        if gpu.pk not in plan.judged:
            continue  # not read, or its layout is changing: what it showed stands
        notes = plan.notes.get(gpu.pk) if plan.changes else None
        if notes:
            text = "; ".join(notes)[:300]
            Gpu.objects.filter(pk=gpu.pk).update(corrected_at=now, correction=text)
            audit_record(actor=None, action="fleet.corrected", obj=gpu, detail=text)
        mismatch = "; ".join(plan.mismatches.get(gpu.pk, []))[:300]
        if mismatch == gpu.mismatch:
            continue
        Gpu.objects.filter(pk=gpu.pk).update(mismatch=mismatch)
        if mismatch:
            audit_record(actor=None, action="fleet.mismatch", obj=gpu, detail=mismatch)
            if admins is None:
                admins = platform_admins()
            for admin in admins:
                notify(
                    kind="fleet", user=admin, message=f"GPU {gpu} on {node.name}: {mismatch}", link="/fleet/"
                )
