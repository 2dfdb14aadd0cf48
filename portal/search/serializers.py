"""Search API: the query and its groups, each row with the path of its page."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from portal.core.serializers import QuerySerializer
from portal.search.selectors import MAX_QUERY, MIN_QUERY, search_query_error


class SearchQuerySerializer(QuerySerializer):
    q = serializers.CharField(
        max_length=MAX_QUERY,
        help_text=f"What to look for: {MIN_QUERY} to {MAX_QUERY} characters (any case), or a "
        "sandbox's or deployment's number (`7` or `#7`).",
    )

    def validate_q(self, value: str) -> str:
        error = search_query_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


class WorkloadHitSerializer(serializers.Serializer):
    id = serializers.IntegerField(
        source="number", help_text="Its number within its kind, as its page and the API's paths name it."
    )
    kind = serializers.CharField()
    name = serializers.CharField()
    team = serializers.CharField(source="team.slug")
    project = serializers.CharField()
    state = serializers.CharField()
    url = serializers.SerializerMethodField()

    def get_url(self, workload) -> str:
        return reverse(f"{workload.kind}-detail", args=[workload.number])


class UserHitSerializer(serializers.Serializer):
    username = serializers.CharField()
    name = serializers.CharField(source="get_full_name")


class ModelHitSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    source = serializers.CharField()
    task = serializers.CharField()
    url = serializers.SerializerMethodField()

    def get_url(self, entry) -> str:
        return reverse("catalog-model", args=[entry.slug])


class WorkloadGroupSerializer(serializers.Serializer):
    rows = WorkloadHitSerializer(many=True)
    more = serializers.BooleanField(help_text="More matched than the rows shown: narrow the query.")


class UserGroupSerializer(serializers.Serializer):
    rows = UserHitSerializer(many=True)
    more = serializers.BooleanField()


class ModelGroupSerializer(serializers.Serializer):
    rows = ModelHitSerializer(many=True)
    more = serializers.BooleanField()


class SearchResultsSerializer(serializers.Serializer):
    query = serializers.CharField()
    workloads = WorkloadGroupSerializer()
    users = UserGroupSerializer()
    models = ModelGroupSerializer()
