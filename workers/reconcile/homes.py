"""Users' homes and teams' datasets on the cluster: what a sandbox's claim shows of its home (its
volume, its size, its use where the cluster says), deleting a home's volume when its owner asks,
and a dataset row as the mount the manifests take."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from portal.sandboxes.models import Dataset, Home
from portal.sandboxes.services import HomeClaim, home_deleted, home_observed, home_trouble
from workers.drivers.base import ClusterDriver, DriverError
from workers.reconcile.clusters import driver_for
from workers.spec import DatasetMount, HomeVolume, WorkloadSpec

log = logging.getLogger(__name__)
USE_EVERY = timedelta(minutes=5)  # how often a home's use is read, where the cluster reports it


def home_volume(claim: HomeClaim | None) -> HomeVolume | None:
    if claim is None:
        return None
    return HomeVolume(
        size_gb=claim.size_gb,
        provisioned_gb=claim.provisioned_gb,
        volume_name=claim.volume_name,
        owner=claim.owner,
    )


def observe_home(driver: ClusterDriver, spec: WorkloadSpec, claim: HomeClaim | None) -> None:
    """Record the home's volume and size until it has settled (and its use, every few minutes,
    on clusters that report it): one or two reads of the claim and volume per look."""
    if claim is None or spec.home is None:
        return
    use_due = getattr(driver, "reports_home_use", False) and (
        claim.used_at is None or timezone.now() - claim.used_at >= USE_EVERY
    )
    if claim.settled and not use_due:
        return
    try:
        state = driver.home_state(spec)
    except DriverError as error:  # the home's trouble is not the sandbox's: record it, go on
        log.warning("home %s of %s: %s", claim.home_id, spec.namespace, error.message)
        home_trouble(home_id=claim.home_id, error=error.message)
        return
    if state.bound:
        home_observed(
            home_id=claim.home_id,
            volume_name=state.volume_name,
            provisioned_gb=state.capacity_gb,
            used_gb=state.used_gb,
            use_asked=use_due,
        )


def homes_to_delete() -> list[int]:
    return list(Home.objects.filter(state=Home.State.DELETING).values_list("pk", flat=True))


def delete_home(home_id: int) -> None:
    home = Home.objects.select_related("cluster").filter(pk=home_id, state=Home.State.DELETING).first()
    if home is None:
        return
    if not home.volume_name:
        home_deleted(home_id=home.pk)  # never made on the cluster
        return
    try:
        driver_for(home.cluster).delete_home(home.volume_name)
    except DriverError as error:
        log.warning("home %s: deleting %s failed: %s", home.pk, home.volume_name, error.message)
        home_deleted(home_id=home.pk, error=error.message)
        return
    home_deleted(home_id=home.pk)


def dataset_mount(dataset: Dataset) -> DatasetMount:
    return DatasetMount(
        slug=dataset.slug,
        kind=dataset.kind,  # type: ignore[arg-type]
        nfs_server=dataset.nfs_server,
        nfs_path=dataset.nfs_path,
        csi_driver=dataset.csi_driver,
        bucket=dataset.bucket,
        volume_attributes=tuple(
            sorted((str(k), str(v)) for k, v in (dataset.volume_attributes or {}).items())
        ),
        credentials_secret=dataset.credentials_secret,
        claim_namespace=dataset.claim_namespace,
        claim_name=dataset.claim_name,
    )
