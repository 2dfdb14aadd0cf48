"""The benchmark's `--workload FILE` mode: a fleet and timed events in JSON, decisions out.

A request that does not fit at once is rejected (no queue); MIG GPUs start empty and an empty MIG
GPU may be handed out whole; slices are cut on placement and destroyed on release. Releasing a
request that was rejected does nothing; releasing an id never placed, or twice, is an error.
"""

from __future__ import annotations

from typing import Any

from bench.checker import Checker
from bench.simulate import BestFit
from bench.workloads import NodeSpec, views
from portal.fleet.geometry import GPU_MODELS, gpu_model
from portal.fleet.placement import Placement, Request, SliceRequest, WholeRequest


class BadWorkload(ValueError):
    """The input is not a workload this mode can run; the message says what to fix."""


def _field(obj: dict[str, Any], name: str, kinds: type | tuple[type, ...], where: str) -> Any:
    if name not in obj:
        raise BadWorkload(f"{where}: missing {name!r}")
    value = obj[name]
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise BadWorkload(f"{where}: {name!r} must be {_kind_names(kinds)}, not {value!r}")
    if not isinstance(value, kinds):
        raise BadWorkload(f"{where}: {name!r} must be {_kind_names(kinds)}, not {value!r}")
    return value


def _kind_names(kinds: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in (kinds if isinstance(kinds, tuple) else (kinds,)))


def _gpu_type(value: str, where: str) -> str:
    if value not in GPU_MODELS:
        raise BadWorkload(f"{where}: unknown gpu_type {value!r} (known: {', '.join(sorted(GPU_MODELS))})")
    return value


def parse_fleet(data: Any) -> list[NodeSpec]:
    if not isinstance(data, dict):
        raise BadWorkload("the workload must be a JSON object with 'fleet' and 'events'")
    fleet = _field(data, "fleet", list, "workload")
    specs: list[NodeSpec] = []
    seen: set[str] = set()
    for number, entry in enumerate(fleet):
        where = f"fleet[{number}]"
        if not isinstance(entry, dict):
            raise BadWorkload(f"{where}: must be an object")
        node = _field(entry, "node", str, where)
        if node in seen:
            raise BadWorkload(f"{where}: node {node!r} listed twice")
        seen.add(node)
        gpus = _field(entry, "gpus", int, where)
        if gpus < 1:
            raise BadWorkload(f"{where}: 'gpus' must be at least 1")
        mig = entry.get("mig", False)
        if not isinstance(mig, bool):
            raise BadWorkload(f"{where}: 'mig' must be true or false")
        specs.append(NodeSpec(node, _gpu_type(_field(entry, "gpu_type", str, where), where), gpus, mig))
    return specs


def _request(event: dict[str, Any], where: str) -> Request:
    gpu_type = _gpu_type(_field(event, "gpu_type", str, where), where)
    if "mig_profile" in event and "count" in event:
        raise BadWorkload(f"{where}: give 'count' or 'mig_profile', not both")
    if "mig_profile" in event:
        name = _field(event, "mig_profile", str, where)
        shape = gpu_model(gpu_type).profile(name)  # type: ignore[union-attr]
        if shape is None:
            known = ", ".join(p.name for p in gpu_model(gpu_type).profiles)  # type: ignore[union-attr]
            raise BadWorkload(f"{where}: {gpu_type} has no MIG profile {name!r} (known: {known})")
        return SliceRequest(gpu_type, shape)
    count = _field(event, "count", int, where) if "count" in event else 1
    if count < 1:
        raise BadWorkload(f"{where}: 'count' must be at least 1")
    return WholeRequest(gpu_type, count)


def _decision(owner: Any, decision: Placement, index_of: dict[int, int]) -> dict[str, Any]:
    if decision.profile is None:
        gpus = [index_of[gpu_id] for gpu_id in decision.gpu_ids]
        return {"id": owner, "placed": True, "node": decision.node, "gpus": gpus}
    return {
        "id": owner,
        "placed": True,
        "node": decision.node,
        "gpu": index_of[decision.gpu_ids[0]],
        "profile": decision.profile,
        "start": decision.start,
    }


def run_workload(data: Any) -> dict[str, Any]:
    """Run a parsed JSON workload; raises BadWorkload on input it cannot run."""
    fleet = views(parse_fleet(data))
    events = _field(data, "events", list, "workload")
    engine = BestFit(fleet, whole_on_empty_mig=True)
    checker = Checker([(g.gpu_id, g.node, g.index, g.gpu_type, g.mig_enabled) for g in fleet])
    index_of = {g.gpu_id: g.index for g in fleet}
    timed = []
    for number, event in enumerate(events):
        where = f"events[{number}]"
        if not isinstance(event, dict):
            raise BadWorkload(f"{where}: must be an object")
        t = _field(event, "t", (int, float), where)
        op = _field(event, "op", str, where)
        if op not in ("place", "release"):
            raise BadWorkload(f"{where}: 'op' must be 'place' or 'release', not {op!r}")
        owner = _field(event, "id", (str, int), where)
        timed.append((t, number, op, owner, _request(event, where) if op == "place" else None, where))
    timed.sort(key=lambda item: (item[0], item[1]))  # by time; input order breaks ties
    held: dict[str, tuple[str, Placement]] = {}
    seen: set[str] = set()
    rejected: set[str] = set()
    decisions: list[dict[str, Any]] = []
    for _, _, op, owner, request, where in timed:
        key = str(owner)
        if op == "release":
            if key in held:
                _, placement = held.pop(key)
                engine.release(placement)
                checker.release(key)
            elif key in seen and key not in rejected:
                raise BadWorkload(f"{where}: id {owner!r} is released twice")
            elif key not in seen:
                raise BadWorkload(f"{where}: release of unknown id {owner!r}")
            continue
        if key in seen:
            raise BadWorkload(f"{where}: id {owner!r} is placed twice")
        seen.add(key)
        assert request is not None
        decision = engine.place(request)
        if isinstance(decision, Placement):
            checker.place(key, request, decision, whole_on_empty_mig=True)
            engine.apply(decision, request)
            held[key] = (where, decision)
            decisions.append(_decision(owner, decision, index_of))
        else:
            rejected.add(key)
            decisions.append({"id": owner, "placed": False, "reason": decision.reason})
    return {"decisions": decisions}
