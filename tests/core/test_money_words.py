"""Amounts in pages read as people write them: "$1,320.96" and quota to two places."""

from __future__ import annotations

from decimal import Decimal

from portal.core.templatetags.money import usd


def test_dollars_have_thousands_separators_and_cents():
    assert usd(Decimal("1320.96")) == "$1,320.96"
    assert usd(Decimal("50000")) == "$50,000.00"
    assert usd(Decimal("0.1")) == "$0.10"
    assert usd("0.00") == "$0.00"
    assert usd(Decimal("-3.5")) == "-$3.50"
    assert usd("") == ""
