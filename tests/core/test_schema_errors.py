"""Every operation of the OpenAPI schema documents the error shape for its error statuses."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_every_operation_documents_its_errors():
    out = StringIO()
    call_command("spectacular", "--format", "openapi-json", "--validate", stdout=out)
    schema = json.loads(out.getvalue())
    assert schema["components"]["schemas"]["Error"]["required"] == ["error"]
    error_ref = {"$ref": "#/components/schemas/Error"}
    operations = 0
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            operations += 1
            responses = operation["responses"]
            expected = {"400", "429"} | ({"404"} if "{" in path else set())
            if method in ("post", "patch", "put", "delete"):
                expected |= {"413"} | ({"409"} if "{" in path else set())
            assert expected <= set(responses), (method, path, sorted(responses))
            for code in expected:
                assert responses[code]["content"]["application/json"]["schema"] == error_ref, (
                    method,
                    path,
                    code,
                )
    assert operations > 40
