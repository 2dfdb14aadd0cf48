from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotencyKey(models.Model):
    """The first response to a create sent with an Idempotency-Key, replayed on retries."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    scope = models.CharField(max_length=50)
    key = models.CharField(max_length=200)
    body_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response_body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "scope", "key"], name="idempotency_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.key}"
