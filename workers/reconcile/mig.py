"""Reconcile a node's MIG layout: ask the cluster for the layout the database intends, and
settle the slices once the cluster reports success (or roll them back on failure)."""

from __future__ import annotations

from typing import Literal

from portal.fleet.models import Node
from portal.fleet.services import mig_layout_of, mig_layout_settled
from workers.reconcile.sandboxes import driver_for


def reconcile_node_mig(node_id: int) -> Literal["pending", "success", "failed"]:
    """Apply the intended layout (idempotent) and report how far the cluster has got."""
    node = Node.objects.select_related("cluster").get(pk=node_id)
    driver = driver_for(node.cluster)
    driver.apply_mig_layout(node.name, mig_layout_of(node_id=node.pk))
    state = driver.mig_layout_state(node.name)
    if state == "pending":
        Node.objects.filter(pk=node.pk).update(mig_config_state="pending")
    else:
        mig_layout_settled(node_id=node.pk, succeeded=state == "success")
    return state
