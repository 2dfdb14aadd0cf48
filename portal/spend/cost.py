"""The one definition of what a hold costs. Everything that reports spend (the live arithmetic
over holds, the roll-ups the workers keep, the per-hold figures of a workload's page) calls these
functions; nothing else multiplies a price by a time.

GPU: cost = share of a GPU x hours held x price per GPU-hour (the price captured when the hold
began). Storage: cost = GB x hours held / 730 x price per GB-month. In Decimal, with the time held
counted exactly in microseconds; sums are rounded to cents only at the end, so many short holds add
up to the same figure as one long one. Sums of many holds are kept in exact units (SHARES_BASE),
so a total is rounded as its exact value would be, even on a half cent.

A hold of a workload that is still open when its workload's `expires_at` has passed stops costing
at `expires_at`, even before the expiry sweep sets its `ended_at` (which it sets to `expires_at`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal

CENT = Decimal("0.01")
SECONDS_PER_HOUR = Decimal(3600)
HOURS_PER_MONTH = Decimal(730)  # a GB-month, as cloud storage is billed
MICROSECOND = timedelta(microseconds=1)
ZERO = Decimal(0)
# Sums of many holds are kept in units: dollars (or GPU-hours) x SHARES_BASE x 3600. A hold's cost
# in units is price x numerator x seconds x (SHARES_BASE / denominator): a finite decimal (10
# places at most) for every share a GPU is cut into (denominators up to 16) and for storage (730),
# so units add up exactly, where dollars would need 1/7ths and 1/9ths.
SHARES_BASE = 52_612_560  # lcm(1, ..., 16) x 73
UNITS = Decimal(SHARES_BASE) * SECONDS_PER_HOUR
EXACT = Context(prec=90)


def to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def hours_to_cents(hours: Decimal) -> Decimal:
    """GPU-hours as reports show them (half to even, as they always were)."""
    return hours.quantize(CENT)


def share_units(amount_seconds: Decimal, denominator: int) -> Decimal:
    """price x numerator x seconds held (or numerator x seconds, for GPU-hours), added up over
    holds of one share denominator, in units: exactly."""
    if SHARES_BASE % denominator:
        raise ValueError(f"a share of 1/{denominator} is not counted exactly: add it to SHARES_BASE")
    return EXACT.multiply(amount_seconds, Decimal(SHARES_BASE // denominator))


def from_units(units: Decimal) -> Decimal:
    """Units as dollars (or GPU-hours), unrounded (28 digits)."""
    return units / UNITS


def units_to_cents(units: Decimal, *, rounding: str = ROUND_HALF_UP) -> Decimal:
    """Units rounded to cents, exactly: a total on a half cent is one in units too (the division
    then ends within EXACT's digits), and any other lies farther from one than EXACT can err."""
    return EXACT.divide(units, UNITS).quantize(CENT, rounding=rounding, context=EXACT)


def units_to_hours(units: Decimal) -> Decimal:
    """GPU-hour units to hundredths, half to even (see hours_to_cents), exactly."""
    return units_to_cents(units, rounding=ROUND_HALF_EVEN)


def held_seconds(held: timedelta) -> Decimal:
    """A duration in seconds, exactly (microseconds included)."""
    return Decimal((held.days * 86400 + held.seconds) * 1_000_000 + held.microseconds).scaleb(-6)


def cost_of(*, price_per_hour: Decimal, numerator: int, denominator: int, held: timedelta) -> Decimal:
    """Unrounded cost of holding numerator/denominator of a GPU (or GB/730 of a GB-month) for `held`."""
    if held <= timedelta(0):
        return ZERO
    amount_seconds = EXACT.multiply(EXACT.multiply(price_per_hour, numerator), held_seconds(held))
    return from_units(share_units(amount_seconds, denominator))


def gpu_hours_of(*, numerator: int, denominator: int, held: timedelta) -> Decimal:
    """GPU-hours of holding numerator/denominator of a GPU for `held`, unrounded."""
    if held <= timedelta(0):
        return ZERO
    return from_units(share_units(EXACT.multiply(numerator, held_seconds(held)), denominator))


def idle_cost_of(*, price_per_hour: Decimal, numerator: int, denominator: int, minutes: int) -> Decimal:
    """Unrounded cost of `minutes` idle minutes of a hold: its cost over that time."""
    return cost_of(
        price_per_hour=price_per_hour,
        numerator=numerator,
        denominator=denominator,
        held=timedelta(minutes=minutes),
    )


def hold_cost(
    *, price_per_hour: Decimal, numerator: int, denominator: int, start: datetime, end: datetime
) -> Decimal:
    """Unrounded cost of holding numerator/denominator of a GPU from start to end."""
    return cost_of(
        price_per_hour=price_per_hour, numerator=numerator, denominator=denominator, held=end - start
    )


def billed_until(hold, *, now: datetime) -> datetime:
    """Where a hold (GPU or storage) stops costing: its end, else now, or for a GPU hold of a
    workload whose expiry has passed, that expiry."""
    if hold.ended_at is not None:
        return hold.ended_at
    workload_id = getattr(hold, "workload_id", None)
    # (A workload that has not started running has no expiry yet.)
    if workload_id is not None and hold.workload.expires_at is not None and hold.workload.expires_at < now:
        return hold.workload.expires_at
    return now


def _held(hold, now: datetime, start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    """When a hold (GPU or storage) ran within the window [start, end) (or all of it)."""
    held_from = hold.started_at if start is None else max(hold.started_at, start)
    held_to = billed_until(hold, now=now)
    return held_from, held_to if end is None else min(held_to, end)


def allocation_cost(
    allocation, *, now: datetime, start: datetime | None = None, end: datetime | None = None
) -> Decimal:
    """Unrounded cost of one allocation, optionally clipped to the window [start, end). Reads
    `allocation.workload` for its expiry when the hold is open (select or prefetch it)."""
    held_from, held_to = _held(allocation, now, start, end)
    return hold_cost(
        price_per_hour=allocation.price_per_hour,
        numerator=allocation.share_numerator,
        denominator=allocation.share_denominator,
        start=held_from,
        end=held_to,
    )


def storage_cost(
    hold, *, now: datetime, start: datetime | None = None, end: datetime | None = None
) -> Decimal:
    """Unrounded cost of one storage hold, clipped likewise: size_gb/730 of the GB-month price an hour."""
    held_from, held_to = _held(hold, now, start, end)
    return hold_cost(
        price_per_hour=hold.price_per_gb_month,
        numerator=hold.size_gb,
        denominator=int(HOURS_PER_MONTH),
        start=held_from,
        end=held_to,
    )


def allocation_gpu_hours(allocation, *, now: datetime, start: datetime, end: datetime) -> Decimal:
    """GPU-hours of one allocation within [start, end), unrounded."""
    held_from, held_to = _held(allocation, now, start, end)
    return gpu_hours_of(
        numerator=allocation.share_numerator,
        denominator=allocation.share_denominator,
        held=held_to - held_from,
    )
