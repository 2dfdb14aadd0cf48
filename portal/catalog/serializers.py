"""Catalog API: entries with their runtime and default sizing, and a sizing answer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.catalog.models import CatalogModel, Runtime
from portal.catalog.selectors import MAX_CONCURRENCY, default_request
from portal.catalog.sizing import Sizing
from portal.core.serializers import QuerySerializer, StrictCharField, StrictIntegerField


def gigabytes_field(**kwargs: Any) -> serializers.DecimalField:
    """GB (10^9 bytes) as a JSON number with two decimals."""
    return serializers.DecimalField(max_digits=12, decimal_places=2, coerce_to_string=False, **kwargs)


class FitSerializer(serializers.Serializer):
    gpu_type = StrictCharField(help_text="GPU type slug, e.g. h100-80gb.")
    mig_profile = StrictCharField(
        allow_null=True, help_text="A MIG profile such as 1g.10gb; null: whole GPUs."
    )
    gpus = StrictIntegerField(help_text="Whole GPUs of one node (tensor parallel); 1 for a slice.")
    price_per_hour = serializers.DecimalField(
        max_digits=12, decimal_places=2, help_text="USD per hour: GPUs x price, or the slice's share of it."
    )


class SizingSerializer(serializers.Serializer):
    weights_gb = gigabytes_field()
    kv_cache_gb = gigabytes_field(help_text="For context x concurrency tokens; 0 for models without one.")
    total_gb = gigabytes_field(help_text="Weights + KV cache + runtime overhead on one GPU.")
    fits = FitSerializer(many=True, help_text="Cheapest first; per GPU type the fewest GPUs that hold it.")
    serve_command = serializers.SerializerMethodField(
        help_text='The runtime\'s command line for the cheapest fit, as its page shows it; "" when nothing fits.'
    )

    def get_serve_command(self, sizing: object) -> str:
        return self.context.get("serve_command", "")


class SizingQuerySerializer(QuerySerializer):
    """The sizing question; the model's defaults fill what is left out."""

    dtype = StrictCharField(required=False, help_text="One of the model's dtypes or quantizations.")
    context = StrictIntegerField(required=False, help_text="Tokens per sequence (8192 or the model's max).")
    concurrency = StrictIntegerField(
        required=False, help_text=f"Concurrent sequences, 1 to {MAX_CONCURRENCY} (default 8)."
    )


class RuntimeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Runtime
        fields = ["slug", "name", "image", "port", "api"]
        read_only_fields = fields


class DefaultSizingSerializer(serializers.Serializer):
    dtype = StrictCharField()
    context = StrictIntegerField()
    concurrency = StrictIntegerField()
    weights_gb = gigabytes_field()
    kv_cache_gb = gigabytes_field()
    total_gb = gigabytes_field()
    cheapest = FitSerializer(
        allow_null=True, help_text="The cheapest fit; null when nothing in the fleet holds it."
    )


class CatalogModelSerializer(serializers.ModelSerializer):
    runtime = RuntimeSerializer()
    dtypes = serializers.ListField(child=StrictCharField())
    quantizations = serializers.ListField(child=StrictCharField())
    tags = serializers.ListField(child=StrictCharField())
    parameters = serializers.DecimalField(max_digits=10, decimal_places=4, help_text="Billions.")
    default_sizing = serializers.SerializerMethodField()

    class Meta:
        model = CatalogModel
        fields = [
            "slug",
            "name",
            "source",
            "gated",
            "license",
            "task",
            "parameters",
            "layers",
            "attention_heads",
            "kv_heads",
            "head_dim",
            "max_context",
            "dtypes",
            "quantizations",
            "default_dtype",
            "runtime",
            "tags",
            "description",
            "default_sizing",
        ]
        read_only_fields = fields

    @extend_schema_field(DefaultSizingSerializer)
    def get_default_sizing(self, entry: CatalogModel) -> dict[str, Any]:
        """The sizing at the model's defaults, from the `sizings` the view computed for the page."""
        sizing: Sizing = self.context["sizings"][entry.pk]
        request = default_request(entry)
        cheapest = sizing.fits[0] if sizing.fits else None
        return DefaultSizingSerializer(
            {
                "dtype": request.precision,
                "context": request.context,
                "concurrency": request.concurrency,
                "weights_gb": sizing.weights_gb,
                "kv_cache_gb": sizing.kv_cache_gb,
                "total_gb": sizing.total_gb,
                "cheapest": cheapest,
            }
        ).data
