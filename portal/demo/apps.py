from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo data of the embedded default: `manage.py seed_demo`."""

    name = "portal.demo"
    label = "demo"
