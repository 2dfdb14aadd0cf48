"""The placement engine: pure Python over plain data, no ORM and no I/O."""

from portal.fleet.placement.engine import place
from portal.fleet.placement.firstfit import first_fit
from portal.fleet.placement.queue import QueuedRequest, drain
from portal.fleet.placement.state import FleetState, PlacementConflict
from portal.fleet.placement.types import (
    GpuView,
    NoFit,
    Placement,
    Request,
    SliceRequest,
    SliceView,
    WholeRequest,
)

__all__ = [
    "FleetState",
    "GpuView",
    "NoFit",
    "Placement",
    "PlacementConflict",
    "QueuedRequest",
    "Request",
    "SliceRequest",
    "SliceView",
    "WholeRequest",
    "drain",
    "first_fit",
    "place",
]
