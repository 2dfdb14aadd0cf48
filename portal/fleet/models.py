from __future__ import annotations

from fractions import Fraction
from urllib.parse import urlsplit

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from portal.fleet.geometry import GpuModel, gpu_model


class GpuType(models.Model):
    """A GPU model in the fleet. Its MIG geometry comes from `portal.fleet.geometry` by slug."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=100)
    memory_gb = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    mig_capable = models.BooleanField(default=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = "GPU type"

    def __str__(self) -> str:
        return self.slug

    @property
    def model(self) -> GpuModel | None:
        return gpu_model(self.slug)

    @property
    def profile_names(self) -> list[str]:
        model = self.model
        return [p.name for p in model.profiles] if model and self.mig_capable else []


class PriceBookEntry(models.Model):
    """Price per whole GPU-hour of a GPU type from a date on; the newest effective entry applies."""

    gpu_type = models.ForeignKey(GpuType, on_delete=models.CASCADE, related_name="prices")
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(0)])
    effective_from = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["gpu_type", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["gpu_type", "effective_from"], name="price_unique_from")
        ]

    def __str__(self) -> str:
        return f"{self.gpu_type} {self.price_per_hour}/h from {self.effective_from:%Y-%m-%d}"


class StoragePrice(models.Model):
    """Price of persistent storage (sandbox home volumes) per GB-month from a date on; the newest
    effective entry applies. A GB-month is 730 hours."""

    price_per_gb_month = models.DecimalField(
        max_digits=10, decimal_places=4, validators=[MinValueValidator(0)]
    )
    effective_from = models.DateTimeField(unique=True)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-effective_from"]

    def __str__(self) -> str:
        return f"{self.price_per_gb_month}/GB-month from {self.effective_from:%Y-%m-%d}"


class Cluster(models.Model):
    class MigChangePolicy(models.TextChoices):
        PER_GPU = "per_gpu", "per GPU: change a GPU's layout while other GPUs of its node are busy"
        IDLE_NODE = "idle_node", "idle node: change layouts only on a node with no slice in use"
        NEVER = "never", "never: use only the slices that already exist"

    name = models.SlugField(unique=True)
    driver = models.CharField(
        max_length=20, choices=[("simulated", "simulated"), ("kubernetes", "kubernetes")]
    )
    kubeconfig = models.CharField(max_length=500, blank=True, help_text="Path to a kubeconfig file.")
    context = models.CharField(max_length=200, blank=True)
    in_cluster = models.BooleanField(default=False)
    api_url = models.CharField(max_length=300, blank=True)

    class MigMode(models.TextChoices):
        AUTO = "auto", "auto: dynamic where discovery finds NVIDIA's DRA driver offering MIG, else layouts"
        LAYOUTS = (
            "layouts",
            "layouts: the GPU Operator's MIG manager re-partitions a GPU whole, while it holds nothing",
        )
        DYNAMIC = "dynamic", "dynamic: slices are cut one by one beside slices in use (NVIDIA's DRA driver)"

    mig_change_policy = models.CharField(
        max_length=20, choices=MigChangePolicy.choices, default=MigChangePolicy.PER_GPU
    )
    mig_mode = models.CharField(
        max_length=20,
        choices=MigMode.choices,
        default=MigMode.AUTO,
        help_text="How MIG slices are cut on this cluster's GPUs. A Kubernetes cluster with the GPU "
        "Operator's MIG manager and device plugin runs 'layouts'; one with NVIDIA's DRA driver and its "
        "DynamicMIG feature gate (Kubernetes 1.34+) runs 'dynamic'; 'auto' follows discovery.",
    )
    provisioning_deadline_minutes = models.PositiveIntegerField(
        default=30,
        help_text="A workload not running this long after it was placed (an unschedulable pod, a MIG "
        "change that never settles, a pull that never ends) fails with the reason, and its GPUs are freed.",
    )

    class SandboxRoute(models.TextChoices):
        INGRESS = "ingress", "Ingress (networking.k8s.io/v1), forward-auth through ingress-nginx"
        HTTPROUTE = "httproute", "Gateway API HTTPRoute (v1.4+), forward-auth through its ExternalAuth filter"

    sandbox_domain = models.CharField(
        max_length=200,
        blank=True,
        help_text="Sandboxes are reached at https://<sandbox namespace>.<this domain> (a wildcard DNS "
        "name pointing at the cluster's ingress). Empty: the host of PORTAL_ACCESS_BASE_URL.",
    )
    sandbox_route = models.CharField(
        max_length=20,
        choices=SandboxRoute.choices,
        default=SandboxRoute.INGRESS,
        help_text="How each running sandbox is routed at its host, behind the portal's sign-in check.",
    )
    ingress_class = models.CharField(
        max_length=100, default="nginx", help_text="The IngressClass of sandbox Ingresses (ingress-nginx)."
    )
    gateway = models.CharField(
        max_length=200,
        default="gpu-portal/sandboxes",
        help_text="namespace/name of the Gateway sandbox HTTPRoutes attach to; its HTTPS listener holds the "
        "sandbox domain's wildcard certificate. With an Ingress, the controller's default certificate "
        "(ingress-nginx --default-ssl-certificate) is the wildcard one.",
    )
    sandbox_tls_secret = models.CharField(
        max_length=200,
        blank=True,
        help_text="namespace/name of the sandbox domain's wildcard certificate Secret for Ingresses. Empty "
        "(the default, and the safer): the Ingress names no Secret and the controller serves its default "
        "certificate, so the key stays in one namespace. Set: the worker copies it into each sandbox's "
        "namespace (its owner cannot read Secrets there) and the Ingress names the copy.",
    )
    user_api_url = models.CharField(
        max_length=300,
        blank=True,
        help_text="The API server's address as researchers reach it with kubectl (in sandbox kubeconfigs). "
        "Empty: the address the workers use.",
    )
    user_ca_data = models.TextField(
        blank=True,
        help_text="PEM of the CA that signs the API server's certificate, for sandbox kubeconfigs. Empty: "
        "the CA the workers trust; for a server with a public certificate leave both empty where they agree.",
    )
    dra_found = models.BooleanField(
        default=False,
        help_text="NVIDIA's DRA driver offered MIG placements on this cluster's nodes at the last discovery.",
    )
    last_discovery_at = models.DateTimeField(null=True, blank=True)
    last_discovery_error = models.TextField(blank=True)

    def __str__(self) -> str:
        return self.name

    @property
    def sandbox_base_domain(self) -> str:
        """The domain sandbox hosts sit under: the one set, else PORTAL_ACCESS_BASE_URL's host."""
        domain = self.sandbox_domain or urlsplit(settings.PORTAL_ACCESS_BASE_URL).hostname or ""
        return domain.strip(".").lower()

    @property
    def effective_mig_mode(self) -> str:
        """The MIG mode in force: the one set, or for `auto` what discovery found."""
        if self.mig_mode == self.MigMode.AUTO:
            return self.MigMode.DYNAMIC if self.dra_found else self.MigMode.LAYOUTS
        return self.mig_mode


def dynamic_mig_q(path: str = "") -> Q:
    """The clusters whose MIG mode in force is "dynamic", as a filter over a path to Cluster."""
    prefix = f"{path}__" if path else ""
    return Q(**{f"{prefix}mig_mode": Cluster.MigMode.DYNAMIC}) | Q(
        **{f"{prefix}mig_mode": Cluster.MigMode.AUTO, f"{prefix}dra_found": True}
    )


class Node(models.Model):
    """A GPU node of a cluster, and the state of the job that applies its MIG layout.

    One writer per MIG field. The portal owns the intent: its fleet services bump
    `mig_layout_wanted` whenever the node's slices change. The workers own what they observe and
    their job state: `mig_config_state` is the cluster's `nvidia.com/mig.config.state` label as
    last read (by discovery or by the MIG reconciler), and the `mig_layout_*` job fields are
    written by the MIG reconciler alone. So the portal never claims to know what the cluster did.
    `mig_managed` is set once by discovery when the node first appears, then only by an admin's
    take-over.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    gpu_type = models.ForeignKey(
        GpuType, null=True, blank=True, on_delete=models.PROTECT, related_name="nodes"
    )
    product = models.CharField(max_length=100, blank=True, help_text="nvidia.com/gpu.product")
    unknown_product = models.BooleanField(default=False, help_text="Product not mapped to a GPU type.")
    schedulable = models.BooleanField(default=True)
    mig_managed = models.BooleanField(
        default=True,
        help_text="The portal may write this node's MIG layout. Off for a node that discovery found "
        "with a layout set outside the portal, until an admin takes it over: applying the portal's "
        "own layout would destroy the slices already there.",
    )
    mig_config_state = models.CharField(
        max_length=20, blank=True, help_text="nvidia.com/mig.config.state as the workers last saw it."
    )
    mig_layout_wanted = models.PositiveIntegerField(
        default=0, help_text="Version of the MIG layout the portal intends; bumped on every change."
    )
    mig_layout_applied = models.PositiveIntegerField(
        default=0, help_text="The wanted version the cluster last reported applied."
    )
    mig_layout_attempts = models.PositiveIntegerField(default=0)
    mig_layout_next_attempt_at = models.DateTimeField(null=True, blank=True)
    mig_layout_last_error = models.TextField(blank=True)
    mig_layout_failed_version = models.PositiveIntegerField(
        default=0, help_text="The wanted version the cluster last reported failed (0: none)."
    )
    mig_layout_lease_until = models.DateTimeField(null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_name")]

    def __str__(self) -> str:
        return self.name

    @property
    def mig_config_words(self) -> tuple[str, str]:
        """The cluster's MIG layout state in words, and how it reads: "good", "warn" or ""."""
        return MIG_CONFIG_WORDS.get(
            self.mig_config_state, (f"MIG layout: {self.mig_config_state.replace('-', ' ')}", "")
        )


# nvidia.com/mig.config.state as the fleet page says it
MIG_CONFIG_WORDS = {
    "success": ("MIG layout applied", "good"),
    "pending": ("MIG layout being applied", "warn"),
    "rebooting": ("MIG layout: node rebooting", "warn"),
    "failed": ("MIG layout failed", "warn"),
}


class Gpu(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, unique=True)
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="gpus")
    mig_enabled = models.BooleanField(default=False)
    # What the node agent last said of it (truth over bookkeeping)
    seen_at = models.DateTimeField(null=True, blank=True, help_text="The node agent's last reading of it.")
    health = models.CharField(
        max_length=10,
        choices=[("ok", "ok"), ("lost", "lost"), ("xid", "XID errors")],
        default="ok",
        help_text="lost: NVML says the GPU is lost; xid: the driver reported critical XID errors.",
    )
    health_detail = models.CharField(max_length=300, blank=True)
    mismatch = models.CharField(
        max_length=300,
        blank=True,
        help_text="What the node agent reads that the records cannot follow (empty: they agree).",
    )
    correction = models.CharField(
        max_length=300, blank=True, help_text="The last correction of the records to the agent's reading."
    )
    corrected_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node", "index"]
        verbose_name = "GPU"
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index")]
        permissions = [("report_telemetry", "Report GPU telemetry (the node agent's credential)")]

    def __str__(self) -> str:
        return f"{self.node.name}/{self.index}"


class MigSlice(models.Model):
    """A MIG GPU instance that exists (or is being created) on a GPU."""

    class State(models.TextChoices):
        CREATING = "creating"
        READY = "ready"

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="mig_slices")
    profile = models.CharField(max_length=30)
    start = models.PositiveSmallIntegerField()
    size = models.PositiveSmallIntegerField()
    compute_slices = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.READY)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["gpu", "start"]
        verbose_name = "MIG slice"
        constraints = [models.UniqueConstraint(fields=["gpu", "start"], name="slice_unique_start")]

    def __str__(self) -> str:
        return f"{self.profile}@{self.start} on {self.gpu}"


class Allocation(models.Model):
    """A whole GPU or a MIG slice held by a workload (a sandbox or a deployment replica) from `started_at` to `ended_at`.

    Spend is derived from these rows and the price captured when the hold began: cost is
    share x hours x price_per_hour, where share is share_numerator / share_denominator of a GPU.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="allocations")
    mig_slice = models.ForeignKey(
        MigSlice, null=True, blank=True, on_delete=models.SET_NULL, related_name="allocations"
    )
    mig_profile = models.CharField(max_length=30, blank=True)
    replica = models.PositiveSmallIntegerField(default=0, help_text="Which replica of a deployment holds it.")
    workload = models.ForeignKey(
        "workloads.Workload", null=True, blank=True, on_delete=models.CASCADE, related_name="allocations"
    )
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="allocations")
    user = models.ForeignKey("accounts.User", on_delete=models.PROTECT, related_name="allocations")
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="allocations")
    share_numerator = models.PositiveSmallIntegerField(default=1)
    share_denominator = models.PositiveSmallIntegerField(default=1)
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4)
    started_at = models.DateTimeField()
    # Billing stops at ended_at (when the user ended it, or at expiry); the GPU is free for others
    # only at released_at, once the cluster objects are gone.
    ended_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["team", "started_at"]),
            models.Index(fields=["released_at"]),
            models.Index(fields=["started_at"]),  # the recent mix of slices (placement demand)
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu"],
                condition=Q(released_at__isnull=True, mig_profile=""),
                name="one_live_whole_hold_per_gpu",
            ),
            models.UniqueConstraint(
                fields=["mig_slice"],
                condition=Q(released_at__isnull=True, mig_slice__isnull=False),
                name="one_live_hold_per_slice",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.gpu} {self.mig_profile or 'whole'} for workload {self.workload_id}"

    @property
    def share(self) -> Fraction:
        return Fraction(self.share_numerator, self.share_denominator)


class SimulatedObject(models.Model):
    """An object of the simulated cluster. Kept in the database so the web process and every
    worker process see one cluster."""

    cluster = models.CharField(max_length=50)
    kind = models.CharField(max_length=50)
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    body = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "namespace", "name"], name="simulated_object_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


# What the MIG layout job and the cluster's reports write on a node; nobody edits them by hand.
NODE_MIG_JOB_FIELDS = (
    "mig_config_state",
    "mig_layout_wanted",
    "mig_layout_applied",
    "mig_layout_attempts",
    "mig_layout_next_attempt_at",
    "mig_layout_last_error",
    "mig_layout_failed_version",
    "mig_layout_lease_until",
)


class StorageHold(models.Model):
    """Persistent storage billed to a user and team: `size_gb` from `started_at` to `ended_at` at
    the price per GB-month captured when the hold began. A resize ends one hold and starts the
    next; deleting the volume ends the last. cost = size_gb x hours / 730 x price."""

    user = models.ForeignKey("accounts.User", on_delete=models.PROTECT, related_name="storage_holds")
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="storage_holds")
    key = models.CharField(
        max_length=100, blank=True, db_index=True, help_text="What it bills, for the code: 'home:<id>'."
    )
    what = models.CharField(max_length=200, help_text="What is stored, for people: 'home of alice'.")
    size_gb = models.PositiveIntegerField()
    price_per_gb_month = models.DecimalField(max_digits=10, decimal_places=4)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["team", "started_at"])]

    def __str__(self) -> str:
        return f"{self.what}: {self.size_gb} GB from {self.started_at:%Y-%m-%d %H:%M}"


class GpuPeriod(models.Model):
    """One period of one GPU or MIG device as the node agents read it: readings are folded into
    the minute and the hour they fall in as they arrive, so the series stay small and chart
    queries read rows, not raw samples. Minutes are kept for days, hours for a year and more
    (PORTAL_TELEMETRY_MINUTE_DAYS, PORTAL_TELEMETRY_HOUR_DAYS)."""

    # No index of its own: the (gpu, minute) and (gpu, hour) indexes serve lookups by GPU, and
    # with a second one the planner may scan all of a GPU's days for an hour of them (idle cost).
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+", db_index=False)
    device = models.CharField(max_length=64, help_text="The GPU's UUID, or its MIG device's.")
    mig_start = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="A MIG device's placement start on its GPU; null for a whole GPU."
    )
    samples = models.PositiveIntegerField(default=0)
    utilization_sum = models.FloatField(default=0, help_text="Sum over the samples that had a figure.")
    utilization_samples = models.PositiveIntegerField(default=0)
    memory_used_mb_max = models.PositiveIntegerField(default=0)
    memory_total_mb = models.PositiveIntegerField(default=0)
    power_watts_sum = models.FloatField(default=0)
    processes_max = models.PositiveSmallIntegerField(default=0)

    class Meta:
        abstract = True

    @property
    def utilization(self) -> float | None:
        """Mean utilization over the period; None where no reading of it had a figure."""
        return self.utilization_sum / self.utilization_samples if self.utilization_samples else None


class GpuMinute(GpuPeriod):
    minute = models.DateTimeField()

    class Meta:
        ordering = ["device", "minute"]
        constraints = [models.UniqueConstraint(fields=["device", "minute"], name="gpu_minute_unique")]
        indexes = [models.Index(fields=["gpu", "minute"]), models.Index(fields=["minute"])]

    def __str__(self) -> str:
        return f"{self.device} at {self.minute:%Y-%m-%d %H:%M}"


class GpuHour(GpuPeriod):
    hour = models.DateTimeField()

    class Meta:
        ordering = ["device", "hour"]
        constraints = [models.UniqueConstraint(fields=["device", "hour"], name="gpu_hour_unique")]
        indexes = [models.Index(fields=["gpu", "hour"]), models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.device} at {self.hour:%Y-%m-%d %H}h"


class ClusterOrphan(models.Model):
    """An object the portal made on a cluster (by its labels) that the database does not know,
    as found by the orphan reconcile: a namespace of a workload the database has no row for
    (after a restore from an older backup, say), or a volume no row names. It is removed only
    after an admin confirmed it and the grace period passed; a home volume (a user's data) is
    reported and never removed by the portal."""

    class Kind(models.TextChoices):
        NAMESPACE = "namespace", "namespace"
        VOLUME = "volume", "dataset volume copy"
        HOME_VOLUME = "home_volume", "home volume"

    class Outcome(models.TextChoices):
        OPEN = "", "open"
        REMOVED = "removed", "removed by the portal"
        GONE = "gone", "gone, or known again"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="orphans")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=253)
    namespace = models.CharField(max_length=253, blank=True, help_text="Empty for cluster-wide objects.")
    workload_id = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The workload id its labels name, if any."
    )
    reason = models.CharField(max_length=300, help_text="Why the database does not know it.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    removed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True, default="")
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["cluster_id", "kind", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "name"],
                condition=Q(removed_at__isnull=True),
                name="one_open_orphan_per_object",
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name} on cluster {self.cluster_id}"

    @property
    def keeps_data(self) -> bool:
        """A home volume holds a user's files: the portal reports it and never removes it."""
        return self.kind == self.Kind.HOME_VOLUME
