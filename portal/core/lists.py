"""API list views without filters. Apart from portal.core.api, which the settings load (its
pagination and error handler) before DRF's generic views can be imported."""

from __future__ import annotations

from typing import Any

from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.serializers import PAGING, refuse_other_parameters


class PagedListView(generics.ListAPIView):
    """A list that takes no filters: only `page` and `page_size`; any other parameter is a 400
    that names it (as StrictFilterBackend does for lists with filters)."""

    filter_backends: list = []

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        refuse_other_parameters(request.query_params, PAGING)
        return super().list(request, *args, **kwargs)
