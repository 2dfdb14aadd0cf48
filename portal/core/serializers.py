"""DRF helpers every API uses: field errors as dotted keys, money and hours fields."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from portal.core.errors import ValidationFailed

# Far beyond any team's maximum lifetime, yet small enough that the expiry stays a valid datetime.
MAX_HOURS = Decimal(1_000_000)


def flat_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Nested serializer errors as dotted keys ("gpu.type"), as the services report them."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if not prefix:
                name = key
            elif key == "non_field_errors":
                name = prefix  # the nested object itself is wrong, e.g. "gpu": "h100"
            else:
                name = f"{prefix}.{key}"
            flat.update(flat_errors(value, name))
        return flat
    if isinstance(detail, list) and detail and not isinstance(detail[0], dict | list):
        return {prefix or "non_field_errors": [str(item) for item in detail]}
    if isinstance(detail, list):
        flat = {}
        for index, item in enumerate(detail):
            flat.update(flat_errors(item, f"{prefix}.{index}"))
        return flat
    return {prefix or "non_field_errors": [str(detail)]}


def validated(serializer: serializers.Serializer) -> dict[str, Any]:
    """The serializer's validated data, or a 400 whose field errors use dotted keys."""
    if not serializer.is_valid():
        raise serializers.ValidationError(flat_errors(serializer.errors))
    return serializer.validated_data


def money(max_digits: int = 14) -> serializers.DecimalField:
    """A USD amount rendered as a decimal string with cents."""
    return serializers.DecimalField(max_digits=max_digits, decimal_places=2, read_only=True)


class HoursField(serializers.DecimalField):
    """A number of hours: int, float or numeric string; fractions allowed."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", MAX_HOURS)
        super().__init__(max_digits=None, decimal_places=None, **kwargs)


def _in_json(field: serializers.Field) -> bool:
    """Whether the field reads a JSON body (typed values), not a form or a query string (text)."""
    return not isinstance(getattr(field.root, "initial_data", None), QueryDict)


class StrictCharField(serializers.CharField):
    """Text only: a number, boolean or object is refused, not turned into text."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON number that is whole: "2" (a string) and true (a boolean) are refused in a JSON body.
    A form or query string carries text, which is read as a number as usual."""

    default_error_messages = {"not_a_number": "Must be a number, not {kind}."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or (isinstance(data, str) and _in_json(self)):
            self.fail("not_a_number", kind="a boolean" if isinstance(data, bool) else "a string")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false in a JSON body ("yes", 1 and "true" are refused there)."""

    default_error_messages = {"strict": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if _in_json(self) and not isinstance(data, bool):
            self.fail("strict")
        return super().to_internal_value(data)


# What a paginated list takes beside its filters.
PAGING = ("page", "page_size")


def refuse_other_parameters(params: Mapping[str, Any], takes: Iterable[str]) -> None:
    """Any query parameter but `takes` (and DRF's `format` override) is a 400 naming what the
    endpoint takes: never silently ignored, where a misspelt filter or grouping would answer with
    every row or the default grouping. For lists (their filters), query serializers (their
    fields) and views that read their parameters by hand."""
    allowed = {*takes, "format"}
    stray = sorted(set(params) - allowed)
    if stray:
        hint = f"Not a parameter here, where {', '.join(sorted(allowed))} are."
        raise ValidationFailed(f"{stray[0]}: {hint}", fields={name: [hint] for name in stray})


class QuerySerializer(serializers.Serializer):
    """Query parameters, as strict as the API's filters: a parameter given empty (`?team=`) is a
    400 naming it, where DRF would read it as left out; so is one the view does not take (a
    misspelt `?grup_by=user` would otherwise answer with the default grouping)."""

    def to_internal_value(self, data: Any) -> Any:
        refuse_other_parameters(data, self.fields)
        empty = {
            name: ["Give a value, or leave the parameter out."]
            for name in self.fields
            if name in data and data.get(name) == ""
        }
        if empty:
            raise serializers.ValidationError(empty)
        return super().to_internal_value(data)
