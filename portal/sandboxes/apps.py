from django.apps import AppConfig


class SandboxesConfig(AppConfig):
    name = "portal.sandboxes"
    label = "sandboxes"
