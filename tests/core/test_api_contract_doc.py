"""docs/api.md, the REST contract users read, lists exactly the operations the served schema has."""

from __future__ import annotations

import re
from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
METHODS = ("get", "post", "put", "patch", "delete")
# A table row: | `GET` `POST` | `/api/v1/sandboxes` | ...
ROW = re.compile(r"^\|\s*((?:`[A-Z]+`\s*)+)\|\s*`(/api/[^`]+)`\s*\|", re.MULTILINE)


def _documented() -> set[tuple[str, str]]:
    found = set()
    for methods, path in ROW.findall(DOC.read_text()):
        for method in re.findall(r"`([A-Z]+)`", methods):
            found.add((method, path))
    return found


def _served() -> set[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        if path.startswith("/api/v1/")
        for method in operations
        if method in METHODS
    }


def test_every_served_operation_is_in_the_contract_and_nothing_else():
    documented, served = _documented(), _served()
    assert served - documented == set(), "operations missing from docs/api.md"
    assert documented - served == set(), "docs/api.md lists operations the portal does not serve"
