"""The GPU Operator's MIG manager and device plugin on the fake's GPU nodes, true to how they
behave (see deploy/README.md and the facts in workers/drivers/kubernetes.py):

- It acts on a change of a node's `nvidia.com/mig.config` label: `pending`, then `success` or
  `failed`; after `failed` it waits for the next change of the label.
- It reads the config from its mounted copy of the ConfigMap, which the kubelet refreshes late:
  the copy changes only when a test calls `refresh_mounts()`. A config name the copy does not
  have fails.
- mig-parted leaves GPUs whose config is unchanged alone and rewrites the others whole; a GPU
  whose layout changes while a pod holds one of its devices fails the change ("in use"), after
  the GPUs before it were already rewritten.
- A label changed again while a change is in progress does not stop it: that change finishes
  and writes its `success` (stale for the new label), and the new one starts on the next step.
- The device plugin then advertises `nvidia.com/mig-<profile>` and `nvidia.com/gpu` per the
  applied layouts (mixed strategy), or every MIG device as `nvidia.com/gpu` (single strategy,
  where a node with mixed profiles is labelled `-MIG-INVALID` and advertises none).
- The kubelet hands each pod that asks for a MIG resource a device of that profile on the node,
  lowest GPU first unless a test pins it (`assign`): the portal does not choose.

Nothing happens on its own: tests call `step()` (one reconcile pass of every node's MIG manager).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from workers.manifests.pods import pinned_node

if TYPE_CHECKING:
    from tests.fakekube.server import FakeKube

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
STRATEGY_LABEL = "nvidia.com/mig.strategy"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_PREFIX = "nvidia.com/mig-"


@dataclass
class _Job:
    config: str
    steps_left: int


@dataclass
class _NodeState:
    layouts: dict[int, Counter] = field(default_factory=dict)  # GPU index -> profile counts (MIG on)
    handled: str = ""  # the label value last picked up
    job: _Job | None = None


class FakeMigManager:
    def __init__(
        self,
        fake: FakeKube,
        *,
        namespace: str = "gpu-operator",
        config_map: str = "gpu-portal-mig-parted-config",
    ):
        self.fake = fake
        self.namespace, self.config_map = namespace, config_map
        self.mounted: dict = {}  # the config file as the MIG manager pods see it
        self.nodes: dict[str, _NodeState] = {}
        self.pinned: dict[tuple[str, str], int] = {}  # (namespace, pod) -> GPU index
        self.steps_per_change = 1
        self.history: list[tuple[str, str, str]] = []  # (node, config, outcome)

    # --- what tests do -------------------------------------------------------------------------

    def adopt(self, node: str, layouts: dict[int, dict[str, int]]) -> None:
        """The node already runs these layouts (as the GPU Operator left it)."""
        state = self.nodes.setdefault(node, _NodeState())
        state.layouts = {index: Counter(counts) for index, counts in layouts.items()}
        state.handled = self._labels(node).get(CONFIG_LABEL, "")
        self._advertise(node)

    def refresh_mounts(self) -> None:
        """The kubelet refreshes the mounted ConfigMap: the MIG manager now reads what it holds."""
        found = self.fake.get("ConfigMap", self.config_map, self.namespace)
        text = (found or {}).get("data", {}).get("config.yaml", "")
        self.mounted = copy.deepcopy((yaml.safe_load(text) or {}).get("mig-configs") or {}) if text else {}

    def assign(self, namespace: str, pod: str, gpu: int) -> None:
        """The kubelet gave this pod its MIG device on GPU `gpu` (not necessarily the portal's)."""
        self.pinned[(namespace, pod)] = gpu

    def step(self) -> None:
        """One pass of every node's MIG manager."""
        for node in self.fake.list("Node"):
            name = node["metadata"]["name"]
            labels = node["metadata"].get("labels") or {}
            if CONFIG_LABEL not in labels:
                continue
            state = self.nodes.setdefault(name, _NodeState(handled=labels[CONFIG_LABEL]))
            if state.job is not None:
                state.job.steps_left -= 1
                if state.job.steps_left <= 0:
                    job, state.job = state.job, None
                    self._finish(name, state, job.config)
                continue
            wanted = labels[CONFIG_LABEL]
            if wanted != state.handled:
                state.handled = wanted
                state.job = _Job(wanted, self.steps_per_change)
                self.fake.set_node_labels(name, {STATE_LABEL: "pending"})

    def devices_in_use(self, node: str) -> dict[int, Counter]:
        """GPU index -> profiles held by pods on the node, as the kubelet assigned them."""
        state = self.nodes.get(node, _NodeState())
        free = {index: Counter(counts) for index, counts in state.layouts.items()}
        used: dict[int, Counter] = {}
        for pod in self._pods_on(node):
            key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
            for profile in _mig_requests(pod):
                order = [self.pinned[key]] if key in self.pinned else sorted(free)
                gpu = next((i for i in order if free.get(i, Counter())[profile] > 0), None)
                if gpu is None:
                    continue  # nothing to give it: the pod would stay Pending
                free[gpu][profile] -= 1
                used.setdefault(gpu, Counter())[profile] += 1
        return used

    # --- inside ---------------------------------------------------------------------------------

    def _finish(self, node: str, state: _NodeState, config: str) -> None:
        entries = self.mounted.get(config)
        if entries is None:
            self._end(node, config, "failed", "config not found in the mounted file")
            return
        gpu_count = int(self._labels(node).get("nvidia.com/gpu.count", "0") or 0)
        wanted = _per_gpu(entries, gpu_count)
        in_use = self.devices_in_use(node)
        for index in range(gpu_count):  # mig-parted walks the GPUs in order
            if state.layouts.get(index) == wanted.get(index):
                continue  # unchanged: left alone
            if in_use.get(index):
                self._advertise(node)
                self._end(node, config, "failed", f"GPU {index} in use")
                return
            if wanted.get(index) is None:
                state.layouts.pop(index, None)
            else:
                state.layouts[index] = wanted[index]
        self._advertise(node)
        self._end(node, config, "success", "applied")

    def _end(self, node: str, config: str, outcome: str, why: str) -> None:
        self.history.append((node, config, f"{outcome}: {why}"))
        self.fake.set_node_labels(node, {STATE_LABEL: outcome})

    def _advertise(self, node: str) -> None:
        """The device plugin (and GFD) after the change: allocatable and count labels."""
        found = self.fake.get("Node", node)
        assert found is not None
        labels = found["metadata"].setdefault("labels", {})
        state = self.nodes.get(node, _NodeState())
        gpu_count = int(labels.get("nvidia.com/gpu.count", "0") or 0)
        totals: Counter = Counter()
        for counts in state.layouts.values():
            totals.update(counts)
        allocatable = {
            k: v for k, v in found["status"]["allocatable"].items() if not k.startswith("nvidia.com/")
        }
        for key in [k for k in labels if k.startswith(MIG_PREFIX) and k.endswith(".count")]:
            del labels[key]
        if labels.get(STRATEGY_LABEL) == "single":
            product = labels.get(PRODUCT_LABEL, "").split("-MIG-")[0]
            if len(totals) == 1:
                (profile,) = totals
                labels[PRODUCT_LABEL] = f"{product}-MIG-{profile}"
                allocatable["nvidia.com/gpu"] = str(sum(totals.values()))
            elif totals:
                labels[PRODUCT_LABEL] = f"{product}-MIG-INVALID"
                allocatable["nvidia.com/gpu"] = "0"
            else:
                labels[PRODUCT_LABEL] = product
                allocatable["nvidia.com/gpu"] = str(gpu_count)
        else:
            allocatable["nvidia.com/gpu"] = str(gpu_count - len(state.layouts))
            for profile, count in sorted(totals.items()):
                if count:
                    resource = profile.replace("+", ".")
                    allocatable[f"{MIG_PREFIX}{resource}"] = str(count)
                    labels[f"{MIG_PREFIX}{resource}.count"] = str(count)
        found["status"]["allocatable"] = allocatable
        found["status"]["capacity"] = dict(allocatable)
        self.fake._put_checked("Node", found)

    def _labels(self, node: str) -> dict:
        found = self.fake.get("Node", node)
        return dict((found or {}).get("metadata", {}).get("labels") or {})

    def _pods_on(self, node: str) -> list[dict]:
        pods = []
        for pod in self.fake.list("Pod"):
            spec = pod.get("spec") or {}
            where = pinned_node(spec)
            if where == node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                pods.append(pod)
        return pods


def _mig_requests(pod: dict) -> list[str]:
    """The MIG profiles a pod's containers ask for, one entry per device."""
    profiles = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        for resource, amount in limits.items():
            if resource.startswith(MIG_PREFIX):
                profile = resource.removeprefix(MIG_PREFIX)
                profile = profile[: -len(".me")] + "+me" if profile.endswith(".me") else profile
                profiles += [profile] * int(amount)
    return profiles


def _per_gpu(entries: list[dict], gpu_count: int) -> dict[int, Counter]:
    """A mig-parted config as GPU index -> profile counts, for the GPUs with MIG on."""
    layouts: dict[int, Counter] = {}
    for entry in entries:
        devices = entry.get("devices", "all")
        indexes = range(gpu_count) if devices == "all" else devices
        for index in indexes:
            if entry.get("mig-enabled"):
                layouts[index] = Counter(entry.get("mig-devices") or {})
            else:
                layouts.pop(index, None)
    return layouts
