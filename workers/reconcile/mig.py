"""Reconcile a node's MIG layout: ask the cluster for the layout the database intends, and
settle the slices once the cluster reports it applied.

The job's state lives on the Node row, not in messages: the portal bumps `mig_layout_wanted`
when the slices change, and this module alone writes what the cluster said and when to look
again (see Node). A node is due while the wanted version is not the applied one, so the periodic
re-drive settles every change even when its message was lost, and a repeated message finds
nothing to do.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from portal.fleet.models import Node
from portal.fleet.services import mig_layout_of, mig_layout_settled
from workers.drivers.base import DriverError, MigLayoutState
from workers.reconcile.clusters import driver_for
from workers.reconcile.leases import lease_give_back, lease_take

log = logging.getLogger(__name__)
RECHECK_SECONDS = 2.0
# About eight minutes of checks: the kubelet's refresh of the config (PORTAL_MIG_CONFIG_SETTLE_SECONDS,
# 120 s), then the 40-112 s the GPU Operator's MIG manager needs and the device plugin's restart;
# a node still pending after that is looked at less often and says so.
PATIENT_CHECKS = 240
SLOW_RECHECK_SECONDS = 60.0
MAX_BACKOFF_SECONDS = 300


def mig_layouts_due(*, now: datetime) -> list[int]:
    """Nodes whose intended MIG layout the cluster has not reported applied, and whose next
    check has come (a node that keeps failing waits out its back-off)."""
    return list(
        Node.objects.exclude(mig_layout_wanted=F("mig_layout_applied"))
        .filter(Q(mig_layout_next_attempt_at__isnull=True) | Q(mig_layout_next_attempt_at__lte=now))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def reconcile_node_mig(node_id: int, *, now: datetime | None = None) -> MigLayoutState:
    """One pass over a node's MIG layout: apply the intended one (idempotent) and record how far
    the cluster has got. Returns that state; a node already settled is left alone ("success").

    A driver error is recorded on the row (so the periodic re-drive retries after a back-off)
    and raised, so a workload waiting for the layout counts it as its own failed attempt.
    """
    now = now or timezone.now()
    node_row = Node.objects.filter(pk=node_id)
    lease = lease_take(node_row, "mig_layout_lease_until", now=now)
    if lease is None:
        return "pending"  # another worker is on it (or there is no such node): look again later
    try:
        # The version is read before the layout: a change committed in between makes the layout
        # newer than its version, never older, so settling never readies a slice not yet asked for.
        node = Node.objects.select_related("cluster").get(pk=node_id)
        version = node.mig_layout_wanted
        if version == node.mig_layout_applied:
            return "success"
        try:
            driver = driver_for(node.cluster)
            layout = mig_layout_of(node_id=node.pk)
            # The MIG manager does not try a failed config again by itself: ask again for a layout
            # the portal wanted since, or for the same one once the back-off is over.
            retry = node.mig_config_state == "failed" and (
                node.mig_layout_failed_version != version
                or node.mig_layout_next_attempt_at is None
                or node.mig_layout_next_attempt_at <= now
            )
            driver.apply_mig_layout(node.name, layout, retry=retry)
            state = driver.mig_layout_state(node.name, layout)
        except DriverError as error:
            log.warning("MIG layout of node %s: %s (retryable=%s)", node.name, error.message, error.retryable)
            _not_yet(node, now, error=error.message, backoff=True)
            raise
        if state == "success":
            return "success" if _settle(node, version) else "pending"
        if state == "failed":
            _not_yet(
                node,
                now,
                observed=state,
                error="the MIG manager could not apply the layout (a GPU in use, or its config not readable yet)",
                backoff=True,
                failed_version=version,
            )
        else:
            _not_yet(node, now, observed=state, error="", backoff=False)
        return state
    finally:
        lease_give_back(node_row, "mig_layout_lease_until", lease)


def _settle(node: Node, version: int) -> bool:
    """The cluster applied the layout read as `version`: ready its slices and mark it applied.
    False when the wanted layout moved on meanwhile; the node stays due and is checked at once."""
    with transaction.atomic():
        settled = mig_layout_settled(node_id=node.pk, version=version)
        fields: dict = {"mig_config_state": "success", "mig_layout_next_attempt_at": None}
        if settled:
            fields.update(mig_layout_applied=version, mig_layout_attempts=0, mig_layout_last_error="")
        Node.objects.filter(pk=node.pk).update(**fields)
    return settled


def _not_yet(
    node: Node,
    now: datetime,
    *,
    error: str,
    backoff: bool,
    observed: str | None = None,
    failed_version: int | None = None,
) -> None:
    """Note a pass that did not settle the layout (and the state the cluster showed, if it was
    reached) and when to look again: soon while the MIG manager works, less often once it has
    taken too long, and backing off on failures."""
    attempts = node.mig_layout_attempts + 1
    if backoff:
        delay = min(MAX_BACKOFF_SECONDS, 2 ** min(attempts, 9))
    elif attempts < PATIENT_CHECKS:
        delay = RECHECK_SECONDS
    else:
        delay = SLOW_RECHECK_SECONDS
        error = f"the MIG manager has not finished after {attempts} checks"
    fields: dict = {"mig_config_state": observed} if observed is not None else {}
    if failed_version is not None:
        fields["mig_layout_failed_version"] = failed_version
    Node.objects.filter(pk=node.pk).update(
        mig_layout_attempts=attempts,
        mig_layout_next_attempt_at=now + timedelta(seconds=delay),
        mig_layout_last_error=error[:2000],
        **fields,
    )
