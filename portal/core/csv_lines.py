"""CSV written line by line, for downloads streamed as the rows come: cells a spreadsheet would run
as a formula (`=`, `+`, `-`, `@` ...) are written defused, with a leading `'` (defusedcsv). A cell
that starts with a tab or a carriage return is defused too: spreadsheets skip that character and
then read the rest as a formula, and defusedcsv does not look at it (OWASP's list has both)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from defusedcsv import csv

_BLANK_LEADS = ("\t", "\r")


class _Echo:
    """A file that hands back what is written to it, for csv.writer in a generator."""

    def write(self, value: str) -> str:
        return value


def _defused(row: Sequence[object]) -> list[object]:
    return [f"'{cell}" if isinstance(cell, str) and cell.startswith(_BLANK_LEADS) else cell for cell in row]


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[object]]) -> Iterator[str]:
    """The header line, then a line per row, each as soon as its row is there."""
    writer = csv.writer(_Echo())
    yield writer.writerow(header)
    for row in rows:
        yield writer.writerow(_defused(row))
