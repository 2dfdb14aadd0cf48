from django.contrib import admin

from portal.catalog.models import CatalogModel, Runtime


@admin.register(Runtime)
class RuntimeAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "image", "port", "api"]


@admin.register(CatalogModel)
class CatalogModelAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "task",
        "runtime",
        "parameters",
        "max_context",
        "default_dtype",
        "enabled",
        "gated",
    ]
    list_filter = ["task", "runtime", "enabled", "gated"]
    list_select_related = ["runtime"]
    search_fields = ["slug", "name", "source", "description"]
    prepopulated_fields = {"slug": ["name"]}
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "slug",
                    "name",
                    "source",
                    "gated",
                    "license",
                    "task",
                    "runtime",
                    "enabled",
                    "description",
                    "tags",
                ]
            },
        ),
        (
            "Architecture (config.json)",
            {"fields": ["parameters", "layers", "attention_heads", "kv_heads", "head_dim", "max_context"]},
        ),
        ("Precisions", {"fields": ["dtypes", "default_dtype", "quantizations", "quantized_sources"]}),
    ]
