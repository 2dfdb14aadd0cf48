"""REST plumbing shared by every app: the error shape, pagination, idempotent creates."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import IntegrityError, transaction
from django.http import Http404
from django_filters import BooleanFilter
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.core.errors import DomainError, ValidationFailed
from portal.core.models import IdempotencyKey
from portal.core.serializers import PAGING, refuse_other_parameters


class StrictFilterBackend(DjangoFilterBackend):
    """django-filter for the API, strict: a filter given with no value (`?state=`) is a 400 on
    every list, where the HTML pages (whose forms send empty fields) read it as "any"; so is a
    parameter the list does not take."""

    def get_filterset(self, request, queryset, view):
        # Here rather than in filter_queryset: views that run their FilterSet by hand (the
        # catalog's) are as strict.
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            empty = {
                name: ["Give a value, or leave the parameter out."]
                for name in filterset_class.base_filters
                if name in request.query_params and not all(request.query_params.getlist(name))
            }
            if empty:
                raise ValidationFailed(
                    f"{next(iter(empty))}: Give a value, or leave the parameter out.", fields=empty
                )
            # django-filter reads a yes/no it does not know as "any": refuse it instead.
            unknown = {
                name: ["true or false."]
                for name, declared in filterset_class.base_filters.items()
                if isinstance(declared, BooleanFilter)
                and request.query_params.get(name, "true") not in ("true", "false")
            }
            if unknown:
                raise ValidationFailed(f"{next(iter(unknown))}: true or false.", fields=unknown)
            # A parameter the list does not take (a misspelt filter, `?stat=running`) is refused,
            # not ignored: ignored, it would answer with every row.
            refuse_other_parameters(request.query_params, [*filterset_class.base_filters, *PAGING])
        return super().get_filterset(request, queryset, view)


class Pagination(PageNumberPagination):
    """`page` (from 1) and `page_size` (1 to 500): anything else is a 400 that says so, never a
    silent default. A page past the last is a 404, as DRF has it."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset, request, view=None):
        self.check_parameters(request)
        return super().paginate_queryset(queryset, request, view)

    def check_parameters(self, request) -> None:
        """The paging parameters given, checked (also where a view answers without pages, such as
        a download of every row: a bad `page` is a 400 there too, as the schema says)."""
        bad: dict[str, list[str]] = {}
        for name, ceiling in (
            (self.page_query_param, None),
            (self.page_size_query_param, self.max_page_size),
        ):
            raw = request.query_params.get(name)
            if raw is None:
                continue
            if not raw.isdigit() or int(raw) < 1 or (ceiling is not None and int(raw) > ceiling):
                bad[name] = [f"A whole number from 1{f' to {ceiling}' if ceiling else ''}."]
        if bad:
            name, (message,) = next(iter(bad.items()))
            raise ValidationFailed(f"{name}: {message}", fields=bad)

    def get_schema_operation_parameters(self, view):
        """`page` and `page_size` with the bounds enforced above, so the schema says them too."""
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["maximum"] = self.max_page_size
        return parameters


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _first_message(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        text = _first_message(value)
        return text if key in ("non_field_errors", "detail") else f"{key}: {text}"
    return str(detail)


def refused_request_error(exc: Exception) -> tuple[dict[str, Any], int] | None:
    """The error body and status for a request Django refuses (a body too large, too many fields:
    a SuspiciousOperation), else None."""
    if not isinstance(exc, SuspiciousOperation):
        return None
    if isinstance(exc, RequestDataTooBig):
        limit_mb = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / 1024 / 1024
        message = f"The request body is too large: the API accepts at most {limit_mb:g} MB."
        return error_body("request_too_large", message), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    if isinstance(exc, TooManyFieldsSent):
        message = f"The request has too many fields: the API accepts at most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS}."
        return error_body("too_many_fields", message), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    if isinstance(exc, TooManyFilesSent):
        message = f"The request has too many files: the API accepts at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES}."
        return error_body("too_many_files", message), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    return error_body("bad_request", "The request was refused as malformed."), status.HTTP_400_BAD_REQUEST


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Render every error as {"error": {"code", "message", "fields"}}."""
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status)
    refused = refused_request_error(exc)
    if refused is not None:
        # Logged as Django logs what it refuses itself.
        logging.getLogger(f"django.security.{exc.__class__.__name__}").error(str(exc))
        return Response(refused[0], status=refused[1])
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = error_body("invalid", _first_message(detail), detail)
    else:
        codes = {
            status.HTTP_401_UNAUTHORIZED: "unauthenticated",
            status.HTTP_403_FORBIDDEN: "forbidden",
            status.HTTP_404_NOT_FOUND: "not_found",
            status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
            status.HTTP_429_TOO_MANY_REQUESTS: "rate_limited",
        }
        code = codes.get(response.status_code, getattr(exc, "default_code", "error"))
        response.data = error_body(code, _first_message(getattr(exc, "detail", str(exc))))
    return response


def idempotent_create(request: Request, scope: str, create: Callable[[], Response]) -> Response:
    """Run `create` once per (user, Idempotency-Key); replay the first response afterwards.

    The key is written in the same transaction as the create, before it runs: a retry that
    arrives while the first request is still running waits on the key's row and then replays
    it, and a create that fails leaves no key, so the retry runs afresh. The same key with a
    different body is a 409, so a client bug cannot silently get the result of another request.
    """
    if "Idempotency-Key" not in request.headers:
        return create()
    key = request.headers["Idempotency-Key"].strip()
    if not key:  # a client whose key generator failed: retries would create twice, unnoticed
        raise exceptions.ValidationError({"Idempotency-Key": ["Must not be empty: send a key or no header."]})
    if len(key) > 200:
        raise exceptions.ValidationError({"Idempotency-Key": ["At most 200 characters."]})
    body_hash = hashlib.sha256(json.dumps(request.data, sort_keys=True, default=str).encode()).hexdigest()
    lookup = {"user": request.user, "scope": scope, "key": key}
    try:
        with transaction.atomic():
            record = IdempotencyKey.objects.create(
                **lookup, body_hash=body_hash, status_code=0, response_body={}
            )
            response = create()
            if response.status_code >= 500:
                raise _NotStored(response)
            record.status_code = response.status_code
            record.response_body = json.loads(json.dumps(response.data, default=str))
            record.save(update_fields=["status_code", "response_body"])
            return response
    except _NotStored as not_stored:
        return not_stored.response
    except IntegrityError:
        pass  # the key exists: replay what the first request answered
    existing = IdempotencyKey.objects.get(**lookup)
    if existing.body_hash != body_hash:
        return Response(
            error_body(
                "idempotency_key_reused",
                "This Idempotency-Key was already used with a different request body.",
            ),
            status=status.HTTP_409_CONFLICT,
        )
    replay = Response(existing.response_body, status=existing.status_code)
    replay["Idempotent-Replayed"] = "true"
    return replay


class _NotStored(Exception):
    """A server error is not an answer to replay: roll the key back with it."""

    def __init__(self, response: Response):
        self.response = response


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retry-safe create: the same key and body return the first result. 1-200 characters; an empty key is a 400.",
)


class CsvRenderer(BaseRenderer):
    """Lets `?format=csv` and `Accept: text/csv` choose a CSV download, which the view streams."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):  # pragma: no cover
        raise NotImplementedError("A CSV view streams its CSV itself.")


class CsvDownloadMixin:
    """For a view whose renderers include CsvRenderer: an unknown `?format=` is a 400 saying which
    are known (`format_hint`), and errors keep the API's JSON error shape whatever was asked for."""

    format_hint = "csv, or leave it out for JSON."

    def perform_content_negotiation(self, request, force=False):
        wanted = request.query_params.get("format")
        known = {renderer.format for renderer in self.get_renderers()}  # `api`: the browsable page
        if wanted is not None and wanted not in known and not force:
            raise ValidationFailed(f"format: {self.format_hint}", fields={"format": [self.format_hint]})
        return super().perform_content_negotiation(request, force)

    def handle_exception(self, exc):
        if (
            getattr(self.request, "accepted_renderer", None) is not None
            and self.request.accepted_renderer.format == "csv"
        ):
            self.request.accepted_renderer, self.request.accepted_media_type = (
                JSONRenderer(),
                "application/json",
            )
        return super().handle_exception(exc)
