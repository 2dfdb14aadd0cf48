"""Plain data the placement engine works on: a fleet snapshot in, a decision out."""

from __future__ import annotations

from dataclasses import dataclass, field

from portal.fleet.geometry import ProfileShape


@dataclass(frozen=True)
class SliceView:
    """A MIG GPU instance that exists on a GPU now."""

    slice_id: int | None
    profile: str
    start: int
    size: int
    held: bool
    media: bool = False


@dataclass
class GpuView:
    """One GPU as the engine sees it: where it is, whether MIG is on, and what holds it."""

    gpu_id: int
    node: str
    index: int
    gpu_type: str
    mig_enabled: bool
    whole_held: bool = False
    slices: list[SliceView] = field(default_factory=list)
    # A MIG layout change is in progress on this GPU: nothing new goes on it until it settles.
    reconfiguring: bool = False
    # The node's cluster allows MIG layout changes: "per_gpu", "idle_node" or "never".
    mig_change_policy: str = "per_gpu"
    # How the cluster cuts MIG slices: "dynamic" (one slice at a time, beside slices in use: the
    # DRA driver) or "layouts" (a GPU's whole layout at once, only while nothing on it is held:
    # the GPU Operator's MIG manager). Released slices stay cut in "layouts".
    mig_mode: str = "dynamic"


@dataclass(frozen=True)
class WholeRequest:
    """`count` whole GPUs of one type, all on one node."""

    gpu_type: str
    count: int


@dataclass(frozen=True)
class SliceRequest:
    """One MIG slice of `profile` on a GPU of `gpu_type` (the profile must be that model's)."""

    gpu_type: str
    profile: ProfileShape


Request = WholeRequest | SliceRequest


@dataclass(frozen=True)
class Placement:
    """Where a request goes.

    Whole GPUs: `node` and `gpu_ids`. A slice: `gpu_ids == (gpu_id,)`, `profile` and `start`;
    `slice_id` names an existing free slice to reuse, or is None when the slice must be created.
    `layout` is set when the decision re-partitions a "layouts" GPU: its whole new layout as
    (profile, start) pairs, every slice free but the one this request takes.
    """

    node: str
    gpu_ids: tuple[int, ...]
    reason: str
    profile: str | None = None
    start: int | None = None
    slice_id: int | None = None
    layout: tuple[tuple[str, int], ...] | None = None

    @property
    def creates_slice(self) -> bool:
        return self.profile is not None and self.slice_id is None


@dataclass(frozen=True)
class NoFit:
    """Why a request cannot be placed now, in words the UI can show."""

    reason: str
