from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Approval(models.Model):
    """A lead's decision on a request over the team's auto-approval line.

    `kind` is "create" for a new sandbox or deployment, "extend" for moving its expiry by
    `extend_hours`, and "scale" for taking a deployment to `replicas` replicas.
    """

    class Kind(models.TextChoices):
        CREATE = "create"
        EXTEND = "extend"
        SCALE = "scale"

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        CANCELLED = "cancelled"

    sandbox = models.ForeignKey("sandboxes.Sandbox", on_delete=models.CASCADE, related_name="approvals")
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="approvals")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.CREATE)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING, db_index=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    why_needed = models.CharField(max_length=300, help_text="Which policy line the request crosses.")
    extend_hours = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True)
    replicas = models.PositiveSmallIntegerField(null=True, blank=True, help_text="A scale request's target.")
    comment = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["sandbox", "kind"], condition=Q(state="pending"), name="one_pending_approval_per_kind"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} approval #{self.pk} ({self.state})"
