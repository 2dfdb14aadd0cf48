"""Reads the fleet API needs: the GPU type catalogue with prices and free capacity now."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from portal.fleet.geometry import ProfileShape
from portal.fleet.models import GpuType
from portal.fleet.selectors import TypeCapacity, capacity_by_type, current_prices
from portal.fleet.services import slice_share


@dataclass(frozen=True)
class ProfileOffer:
    shape: ProfileShape
    gpu_equivalents: Decimal
    price_per_hour: Decimal


@dataclass(frozen=True)
class GpuTypeOffer:
    gpu_type: GpuType
    price_per_hour: Decimal
    profiles: list[ProfileOffer]
    capacity: TypeCapacity


def gpu_type_catalog() -> list[GpuTypeOffer]:
    """Every GPU type with its price per GPU-hour, its MIG profiles and what is free now."""
    prices = current_prices()
    capacity = capacity_by_type()
    offers = []
    for gpu_type in GpuType.objects.order_by("slug"):
        price = prices.get(gpu_type.pk, Decimal(0))
        model = gpu_type.model
        profiles = []
        if model is not None and gpu_type.mig_capable:
            for shape in model.profiles:
                numerator, denominator = slice_share(shape)
                share = Decimal(numerator) / Decimal(denominator)
                profiles.append(
                    ProfileOffer(shape=shape, gpu_equivalents=share, price_per_hour=price * share)
                )
        offers.append(
            GpuTypeOffer(
                gpu_type=gpu_type,
                price_per_hour=price,
                profiles=profiles,
                capacity=capacity.get(gpu_type.pk, TypeCapacity(0, 0, 0, {})),
            )
        )
    return offers
