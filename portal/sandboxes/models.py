"""What only sandboxes keep: kubectl access issued to their owners, an ssh sandbox's host key,
and their owners' homes."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
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


class SshHostKey(models.Model):
    """An ssh sandbox's server host key: made once, when its objects are first built, kept
    encrypted while it lives (its namespace holds it as the Secret `ssh-host-key`), so its owner
    can check the fingerprint their ssh client shows against the page's; the row goes when the
    sandbox ends."""

    workload = models.OneToOneField(
        "workloads.Workload", on_delete=models.CASCADE, related_name="ssh_host_key"
    )
    private_key = EncryptedTextField()
    public_key = models.CharField(max_length=200, help_text="As known_hosts holds it: ssh-ed25519 AAAA…")
    fingerprint = models.CharField(
        max_length=60, help_text="SHA256:..., as ssh shows it on first connecting."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"ssh host key of {self.workload_id}"


class Home(models.Model):
    """A user's persistent home volume: made on a cluster by their first sandbox there, mounted
    at /home in each new sandbox of theirs (one at a time: a second sandbox running beside it
    gets a scratch home), kept when sandboxes end, billed per GB-month until deleted.

    On Kubernetes it is a PersistentVolume kept with reclaim policy Retain, bound in turn to each
    sandbox's claim `home` (see docs/homes.md)."""

    class State(models.TextChoices):
        NEW = "new", "being made"
        READY = "ready", "ready"
        DELETING = "deleting", "being deleted"
        DELETED = "deleted", "deleted"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="homes")
    team = models.ForeignKey(
        "accounts.Team", on_delete=models.PROTECT, related_name="+", help_text="Billed to."
    )
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=20, choices=State.choices, default=State.NEW)
    size_gb = models.PositiveIntegerField(help_text="The size its owner wants (and is billed for).")
    provisioned_gb = models.PositiveIntegerField(default=0, help_text="The size the cluster reports.")
    volume_name = models.CharField(max_length=253, blank=True, help_text="The PersistentVolume behind it.")
    attached_to = models.ForeignKey(
        "workloads.Workload", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    used_gb = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    used_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=~models.Q(state="deleted"), name="one_home_per_user"
            )
        ]

    def __str__(self) -> str:
        # the audit log writes "home " before it: "home alice (50 GB, ready)"
        return f"{self.user.username} ({self.size_gb} GB, {self.get_state_display().lower()})"


class Dataset(models.Model):
    """Data a team's sandboxes may mount read-only at /data/<slug>, registered by an admin:
    an NFS export, an object-store bucket (through a CSI driver, with a credentials Secret), or
    an existing PersistentVolumeClaim on storage that several nodes may read (NFS, CephFS, EFS)."""

    class Kind(models.TextChoices):
        NFS = "nfs", "NFS export"
        BUCKET = "bucket", "object-store bucket (CSI driver)"
        PVC = "pvc", "existing PersistentVolumeClaim"

    slug = models.CharField(
        max_length=40,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                "Lowercase letters, digits and '-', starting and ending with a letter or digit: it names "
                "volumes and claims on the cluster.",
            )
        ],
        help_text="Mounted at /data/<slug>.",
    )
    name = models.CharField(max_length=100)
    description = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    nfs_server = models.CharField(max_length=253, blank=True)
    nfs_path = models.CharField(max_length=500, blank=True)
    csi_driver = models.CharField(
        max_length=253, blank=True, help_text="Bucket: the CSI driver that mounts it."
    )
    bucket = models.CharField(max_length=253, blank=True)
    volume_attributes = models.JSONField(
        default=dict,
        blank=True,
        help_text="Bucket: more of the CSI driver's volume attributes (region, endpoint).",
    )
    credentials_secret = models.CharField(
        max_length=253,
        blank=True,
        help_text="Bucket: a Secret in PORTAL_DATASET_NAMESPACE with the bucket's credentials, copied into each "
        "sandbox that mounts it for the CSI driver.",
    )
    claim_namespace = models.CharField(max_length=63, blank=True)
    claim_name = models.CharField(max_length=253, blank=True)
    teams = models.ManyToManyField(
        "accounts.Team", blank=True, related_name="datasets", help_text="Who may mount it."
    )
    sandboxes = models.ManyToManyField("workloads.Workload", blank=True, related_name="datasets")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        needed = {
            self.Kind.NFS: ("nfs_server", "nfs_path"),
            self.Kind.BUCKET: ("csi_driver", "bucket"),
            self.Kind.PVC: ("claim_namespace", "claim_name"),
        }.get(self.kind, ())
        missing = {
            field: "Required for this kind of dataset." for field in needed if not getattr(self, field)
        }
        if missing:
            raise ValidationError(missing)
        if self.kind == self.Kind.NFS and not self.nfs_path.startswith("/"):
            raise ValidationError({"nfs_path": "An absolute path on the server, such as /export/imagenet."})
