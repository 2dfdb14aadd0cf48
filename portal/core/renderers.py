"""The API's renderers: JSON, and DRF's browsable HTML pages under a policy they can keep."""

from __future__ import annotations

from typing import Any

from csp.constants import SELF, UNSAFE_INLINE
from rest_framework import renderers


class BrowsableAPIRenderer(renderers.BrowsableAPIRenderer):
    """DRF's HTML pages of the API set a few styles inline (a `style` element, `style` attributes
    on its buttons): these pages alone allow inline style. Scripts stay the portal's own files only."""

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None
    ) -> Any:
        response = (renderer_context or {}).get("response")
        if response is not None:
            response._csp_replace = {"style-src": [SELF, UNSAFE_INLINE]}
        return super().render(data, accepted_media_type, renderer_context)
