"""Search API: the search page's results as JSON, with the same visibility."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from portal.search.selectors import search
from portal.search.serializers import SearchQuerySerializer, SearchResultsSerializer


class SearchView(generics.GenericAPIView):
    """Workloads you may see, your teammates (everyone for admins) and catalog models matching `q`:
    at most 10 of each, newest workloads first, with `more` when more matched."""

    serializer_class = SearchResultsSerializer

    @extend_schema(parameters=[SearchQuerySerializer], responses=SearchResultsSerializer)
    def get(self, request: Request) -> Response:
        query = SearchQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        results = search(user=request.user, query=query.validated_data["q"])
        return Response(SearchResultsSerializer(results).data)
