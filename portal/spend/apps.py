from django.apps import AppConfig


class SpendConfig(AppConfig):
    name = "portal.spend"
    label = "spend"
