"""Money as people read it in a page: "$1,320.96", as every other amount is written."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import template

register = template.Library()


@register.filter
def usd(value: object) -> str:
    """Dollars with thousands separators and cents; what is not a number is shown as it is."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    return f"-${-amount:,.2f}" if amount < 0 else f"${amount:,.2f}"


@register.filter
def usd_abs(value: object) -> str:
    """An amount without its sign, for a sentence that says which side it is on ("over by $3.00")."""
    try:
        return usd(abs(Decimal(str(value))))
    except (InvalidOperation, ValueError):
        return str(value)
