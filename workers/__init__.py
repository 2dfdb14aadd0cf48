"""The worker side: the Celery app, its tasks, cluster drivers and reconcilers."""
