"""The streamed CSV writer: formula-like cells come out defused, whatever leads them."""

from __future__ import annotations

import csv
import io

from portal.core.csv_lines import csv_lines


def _cells(rows: list[list[object]]) -> list[list[str]]:
    text = "".join(csv_lines(["a", "b"], rows))
    return list(csv.reader(io.StringIO(text, newline="")))[1:]


def test_formula_starts_are_defused():
    assert _cells([["=1+1", "@SUM(A1)"], ["+cmd", "-2+3"]]) == [["'=1+1", "'@SUM(A1)"], ["'+cmd", "'-2+3"]]


def test_a_tab_or_carriage_return_before_a_formula_is_defused():
    assert _cells([["\t=cmd|' /C calc'!A0", "\r=1+1"]]) == [["'\t=cmd|' /C calc'!A0", "'\r=1+1"]]


def test_plain_text_numbers_and_negative_amounts_pass_unchanged():
    assert _cells([["sandbox train", "-12.50"], [3, "a\tb"]]) == [["sandbox train", "-12.50"], ["3", "a\tb"]]
