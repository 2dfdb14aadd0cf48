"""A MIG layout change whose message the broker dropped is still applied: the real worker's beat
re-drives every node whose wanted layout is not the applied one."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from portal.fleet.models import MigSlice, Node, SimulatedObject
from portal.fleet.services import mig_layout_changed

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_dropped_mig_layout_message_is_applied_by_the_workers_beat(
    celery_worker_process, fleet, monkeypatch
):
    monkeypatch.setattr("portal.fleet.services.enqueue", lambda *args, **kwargs: None)  # dropped
    node = fleet["mig"]
    gpu = node.gpus.order_by("index").first()
    with transaction.atomic():
        mig_layout_changed(node_ids=[node.pk])
        cut = MigSlice.objects.create(
            gpu=gpu, profile="1g.10gb", start=0, size=1, compute_slices=1, state=MigSlice.State.CREATING
        )

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = Node.objects.get(pk=node.pk)
        if row.mig_layout_applied == row.mig_layout_wanted:
            break
        time.sleep(0.25)
    row = Node.objects.get(pk=node.pk)
    assert (row.mig_layout_wanted, row.mig_layout_applied, row.mig_config_state) == (1, 1, "success")
    assert MigSlice.objects.get(pk=cut.pk).state == MigSlice.State.READY
    layout = SimulatedObject.objects.get(kind="MigLayout", name=node.name).body["layout"]
    assert layout[str(gpu.index)] == [["1g.10gb", 0]]
