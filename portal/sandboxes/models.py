"""What only sandboxes keep: kubectl access issued to their owners."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from encrypted_fields.fields import EncryptedTextField


class KubeAccess(models.Model):
    """A kubeconfig for one sandbox and its owner: asked for on the page or the API, issued by a
    worker (a token of the sandbox's ServiceAccount, expiring no later than the sandbox), kept
    encrypted until it expires or the sandbox ends, when the row goes."""

    workload = models.ForeignKey("workloads.Workload", on_delete=models.CASCADE, related_name="kube_access")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    requested_at = models.DateTimeField()
    issued_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    token = EncryptedTextField(null=True, blank=True)
    server = models.CharField(max_length=300, blank=True)
    ca_pem = models.TextField(blank=True)
    namespace = models.CharField(max_length=63, blank=True)
    simulated = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workload", "user"], name="one_kube_access_per_user")]

    def __str__(self) -> str:
        return f"kubectl access to {self.workload_id} for {self.user_id}"

    @property
    def pending(self) -> bool:
        return self.issued_at is None or self.issued_at < self.requested_at
