from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Registers the Celery app (and its tasks) as current in every process that loads Django,
    so the portal can enqueue jobs by name without importing this package."""

    name = "workers"
    label = "workers"

    def ready(self) -> None:
        import importlib

        from workers.celery import app

        for module in app.conf.imports:
            importlib.import_module(module)
