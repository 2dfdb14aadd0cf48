"""The web side's counterpart of the API exception handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest

from portal.core.errors import DomainError, NotFound


def error_messages(error: DomainError) -> list[str]:
    """A refusal's messages for a page to list: one per field it names, else its own."""
    return [message for messages in error.fields.values() for message in messages] or [error.message]


def add_service_errors(form: forms.Form, error: DomainError, mapping: dict[str, str] | None = None) -> None:
    """Put a service's field errors next to the form's fields (`mapping`: the service's field
    names to the form's, where they differ); anything else becomes a form-wide error."""
    placed = False
    for key, messages_of_field in error.fields.items():
        field = (mapping or {}).get(key, key)
        if field not in form.fields or not isinstance(messages_of_field, list | tuple):
            continue
        for message in messages_of_field:
            form.add_error(field, str(message))
        placed = True
    if not placed:
        form.add_error(None, error.message)


def suggest(field: forms.Field, values: list[str], *, list_id: str) -> None:
    """Offer `values` as the field is typed (an HTML datalist, which partials/field.html draws);
    anything else may still be typed."""
    field.suggestions = [(list_id, values)] if values else []
    if values:
        field.widget.attrs["list"] = list_id


def suggest_by(
    field: forms.Field, lists: dict[str, list[str]], *, list_id: str, by: str, chosen: str
) -> None:
    """Offer, as the field is typed, the values of the list of what the form's field `by` holds
    (`chosen` when the page is drawn): a datalist `<list_id>-<key>` per key of `lists`, and the
    page's script points the field at another one when `by` changes (static/js/portal.js)."""
    field.suggestions = [(f"{list_id}-{key}", values) for key, values in lists.items() if values]
    if field.suggestions:
        field.widget.attrs.update(
            {"list": f"{list_id}-{chosen}", "data-list-by": by, "data-list-prefix": f"{list_id}-"}
        )


def form_refused(request: HttpRequest, form: forms.Form) -> bool:
    """True when `form` is invalid, after showing its first error as a message: an invalid form
    stops the request before any service sees it."""
    if form.is_valid():
        return False
    field, errors = next(iter(form.errors.items()))
    label = form.fields[field].label if field in form.fields else None
    messages.error(request, f"{label}: {errors[0]}" if label else errors[0])
    return True


def typed_keep(request: HttpRequest, key: str, value: str) -> None:
    """What was typed in a refused form, kept for its page after the redirect (read once, with
    `typed_take`), so the user corrects it rather than types it again."""
    request.session[f"typed:{key}"] = value[:200]


def typed_take(request: HttpRequest, key: str) -> str | None:
    """What `typed_keep` kept under `key`, once; None when nothing was refused."""
    return request.session.pop(f"typed:{key}", None) or None


def run_service(request: HttpRequest, action: Callable[[], Any], *, success: str | None = None) -> Any:
    """Call a service; show its domain error as a message instead of a 500. Returns the result or
    None. An object the user may not see is a 404, as in the API: never a message that it exists."""
    try:
        result = action()
    except NotFound as error:
        raise Http404(error.message) from error
    except DomainError as error:
        messages.error(request, error.message)
        return None
    if success:
        messages.success(request, success)
    return result
