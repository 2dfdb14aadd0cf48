"""The benchmark's `--workload FILE` mode: a fleet and timed events in JSON, decisions out.

A request that does not fit at once is rejected (no queue); a MIG GPU that holds nothing may be
handed out whole (its free slices go). MIG GPUs start empty unless the node lists `layouts`,
whose slices start free. The top-level `mig_mode` says how slices are cut:

- `dynamic` (the default): one at a time, beside the slices in use; a free slice in the way of a
  new one is destroyed, and a slice is destroyed on release.
- `layouts`: a GPU is re-partitioned into a whole new layout, only while it holds nothing, and
  the request takes one of its slices; released slices stay cut. Each slice decision carries
  `layout`: the GPU's new layout as `{"profile", "start"}` objects when it re-partitioned the
  GPU, else null.

Releasing a request that was rejected does nothing; releasing an id never placed, or twice, is an
error.
"""

from __future__ import annotations

from typing import Any

from bench.checker import Checker
from bench.simulate import BestFit
from bench.workloads import NodeSpec, checker_rows, views
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


def parse_mode(data: Any) -> str:
    mode = data.get("mig_mode", "dynamic") if isinstance(data, dict) else "dynamic"
    if mode not in ("dynamic", "layouts"):
        raise BadWorkload(f"workload: 'mig_mode' must be 'dynamic' or 'layouts', not {mode!r}")
    return mode


def _layouts(
    entry: dict[str, Any], gpu_type: str, gpus: int, where: str
) -> dict[int, tuple[tuple[str, int], ...]]:
    """A node's `layouts`: GPU index (a string, as JSON keys are) -> list of {profile, start}."""
    raw = entry.get("layouts", {})
    if not isinstance(raw, dict):
        raise BadWorkload(f"{where}: 'layouts' must be an object of GPU index -> list of slices")
    if raw and not entry.get("mig", False):
        raise BadWorkload(f"{where}: 'layouts' given for a node without MIG")
    model = gpu_model(gpu_type)
    assert model is not None
    result = {}
    for key, slices in raw.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < gpus):
            raise BadWorkload(f"{where}: layouts key {key!r} is not a GPU index below {gpus}")
        if not isinstance(slices, list):
            raise BadWorkload(f"{where}: layouts[{key!r}] must be a list of {{profile, start}}")
        layout = []
        taken: set[int] = set()
        for number, item in enumerate(slices):
            at = f"{where}: layouts[{key!r}][{number}]"
            if not isinstance(item, dict):
                raise BadWorkload(f"{at}: must be an object with 'profile' and 'start'")
            name = _field(item, "profile", str, at)
            start = _field(item, "start", int, at)
            shape = model.profile(name)
            if shape is None:
                raise BadWorkload(f"{at}: {gpu_type} has no MIG profile {name!r}")
            slots = set(range(start, start + shape.size))
            if start not in shape.starts or start + shape.size > 8 or slots & taken:
                raise BadWorkload(f"{at}: {name} cannot start at slot {start} here (allowed: {shape.starts})")
            taken |= slots
            layout.append((name, start))
            names = [n for n, _ in layout]
            if names.count(name) > shape.max_count or (
                shape.media and sum(n.endswith("+me") for n in names) > 1
            ):
                raise BadWorkload(f"{at}: too many {name} on one GPU")
        result[int(key)] = tuple(layout)
    return result


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
        gpu_type = _gpu_type(_field(entry, "gpu_type", str, where), where)
        specs.append(NodeSpec(node, gpu_type, gpus, mig, _layouts(entry, gpu_type, gpus, where)))
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


def _decision(owner: Any, decision: Placement, index_of: dict[int, int], mode: str) -> dict[str, Any]:
    if decision.profile is None:
        gpus = [index_of[gpu_id] for gpu_id in decision.gpu_ids]
        return {"id": owner, "placed": True, "node": decision.node, "gpus": gpus}
    result = {
        "id": owner,
        "placed": True,
        "node": decision.node,
        "gpu": index_of[decision.gpu_ids[0]],
        "profile": decision.profile,
        "start": decision.start,
    }
    if mode == "layouts":
        layout = decision.layout
        result["layout"] = None if layout is None else [{"profile": p, "start": s} for p, s in layout]
    return result


def run_workload(data: Any) -> dict[str, Any]:
    """Run a parsed JSON workload; raises BadWorkload on input it cannot run."""
    mode = parse_mode(data)
    fleet = views(parse_fleet(data), mode)
    events = _field(data, "events", list, "workload")
    engine = BestFit(fleet, whole_on_empty_mig=True)
    checker = Checker(checker_rows(fleet))
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
            decisions.append(_decision(owner, decision, index_of, mode))
        else:
            rejected.add(key)
            decisions.append({"id": owner, "placed": False, "reason": decision.reason})
    return {"decisions": decisions}
