"""Fixtures for worker tests against the fake Kubernetes API server: a cluster row pointing at
it, its fleet discovered from the fake's preloaded GPU nodes, and sandboxes placed on it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from portal.fleet.models import Cluster, Node
from portal.fleet.services import fleet_node_take_over
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload
from tests.factories import ClusterFactory, UserFactory
from tests.fakekube import FakeKube, fixtures
from workers.reconcile.discovery import discover_cluster
from workers.reconcile.workloads import reconcile_workload

fake_kube = fixtures.fake_kube

WHOLE = {"team": "vision", "name": "whole", "gpu_type": "h100-80gb", "count": 1, "ttl_hours": 2}
SLICE = {"team": "vision", "name": "small", "gpu_type": "h100-80gb", "mig_profile": "1g.10gb", "ttl_hours": 1}


@pytest.fixture
def kube_cluster(db, fake_kube: FakeKube) -> Cluster:
    """A `kubernetes` cluster reached at the fake's URL, its Node and Gpu rows discovered from it:
    gpu-h100-a (8 whole H100s), gpu-h100-b (8 MIG H100s), gpu-a100-a (4 MIG A100s). The MIG nodes
    arrive with layouts of their own (`all-balanced`, `all-1g.5gb`); an admin has taken over the
    mixed-strategy one, so the portal cuts its slices (the single-strategy A100 stays its own)."""
    cluster = ClusterFactory(name="gpu", driver="kubernetes", api_url=fake_kube.url)
    assert discover_cluster(cluster.pk) is not None
    assert set(Node.objects.filter(cluster=cluster, mig_managed=False).values_list("name", flat=True)) == {
        "gpu-h100-b",
        "gpu-a100-a",
    }
    for node in Node.objects.filter(cluster=cluster, mig_managed=False).exclude(name="gpu-a100-a"):
        fleet_node_take_over(user=UserFactory(username="ops", is_staff=True), node_id=node.pk)
    cluster.refresh_from_db()
    return cluster


def mig_manager_runs(fake: FakeKube) -> None:
    """The kubelet refreshes the mounted MIG config, and the MIG manager applies what the node's
    label points at (picked up, then done)."""
    fake.mig.refresh_mounts()
    fake.mig.step()
    fake.mig.step()


@pytest.fixture
def request_on_kube(run_jobs, kube_cluster, researcher) -> Callable[..., Workload]:
    """Request a sandbox as the researcher and run the jobs it enqueues; returns the fresh row."""

    def request(**fields: object) -> Workload:
        sandbox = run_jobs(lambda: sandbox_request(user=researcher, **fields))
        return Workload.objects.get(pk=sandbox.pk)

    return request


@pytest.fixture
def running_on_kube(request_on_kube, fake_kube: FakeKube) -> Callable[..., Workload]:
    """A sandbox taken to `running` on the fake: requested, its MIG layout (if it needs a
    re-partition) applied by the fake's MIG manager, its pod marked ready, reconciled."""

    def start(**fields: object) -> Workload:
        sandbox = request_on_kube(**fields)
        if fake_kube.get("Namespace", sandbox.namespace) is None:  # waiting for the MIG manager
            mig_manager_runs(fake_kube)
            reconcile_workload(sandbox.pk)
        fake_kube.pod_running(sandbox.namespace)
        reconcile_workload(sandbox.pk)
        sandbox.refresh_from_db()
        assert sandbox.state == "running", sandbox.message
        return sandbox

    return start
