from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "portal.observability"
    label = "observability"
