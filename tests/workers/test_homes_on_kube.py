"""Persistent homes on the Kubernetes driver, end to end over HTTP against the fake API server:
the first sandbox provisions the volume and the portal keeps it (Retain), the next sandbox's
claim is bound to it, a sandbox beside it gets a scratch home, growing and deleting it."""

from __future__ import annotations

import json
import threading
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from portal.core.errors import Conflict, ValidationFailed
from portal.fleet.models import StorageHold
from portal.sandboxes.models import Home
from portal.sandboxes.services import home_delete, home_resize
from portal.workloads.models import Workload
from portal.workloads.services import workload_terminate
from tests.fakekube import FakeKube
from tests.workers.conftest import WHOLE
from workers.drivers.factory import get_driver
from workers.reconcile.workloads import reconcile_workload

pytestmark = pytest.mark.django_db


def end(run_jobs, sandbox: Workload, user) -> None:
    run_jobs(lambda: workload_terminate(user=user, workload_id=sandbox.pk, kind="sandbox"))


def test_a_home_outlives_its_sandbox_and_moves_to_the_next_one(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher
):
    first = running_on_kube(**WHOLE)
    claim = fake_kube.get("PersistentVolumeClaim", "home", first.namespace)
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"  # the team's default
    assert (
        "volumeName"
        not in fake_kube.get("StatefulSet", "sandbox", first.namespace)["spec"]["template"]["spec"]
    )
    statefulset = fake_kube.get("StatefulSet", "sandbox", first.namespace)
    assert "volumeClaimTemplates" not in statefulset["spec"]
    assert {"name": "home", "persistentVolumeClaim": {"claimName": "home"}} in statefulset["spec"][
        "template"
    ]["spec"]["volumes"]
    home = Home.objects.get(user=researcher)
    assert home.state == Home.State.READY and home.attached_to_id == first.pk
    volume = fake_kube.get("PersistentVolume", home.volume_name)
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"  # kept past the sandbox
    assert volume["metadata"]["labels"]["gpu-portal/home-of"] == "alice"
    (hold,) = StorageHold.objects.filter(user=researcher)
    assert (hold.size_gb, hold.ended_at, hold.what) == (50, None, "home of alice")

    end(run_jobs, first, researcher)
    assert fake_kube.get("PersistentVolume", home.volume_name)["status"]["phase"] == "Released"

    second = running_on_kube(**{**WHOLE, "name": "second"})
    claim = fake_kube.get("PersistentVolumeClaim", "home", second.namespace)
    assert claim["spec"]["volumeName"] == home.volume_name and claim["status"]["phase"] == "Bound"
    volume = fake_kube.get("PersistentVolume", home.volume_name)
    assert (
        volume["spec"]["claimRef"]["namespace"] == second.namespace and volume["status"]["phase"] == "Bound"
    )
    home.refresh_from_db()
    assert home.attached_to_id == second.pk
    assert StorageHold.objects.filter(user=researcher).count() == 1  # still the one home

    beside = running_on_kube(**{**WHOLE, "name": "beside"})
    assert fake_kube.get("PersistentVolumeClaim", "home", beside.namespace) is None
    assert fake_kube.get("StatefulSet", "sandbox", beside.namespace)["spec"][
        "volumeClaimTemplates"
    ]  # scratch
    home.refresh_from_db()
    assert home.attached_to_id == second.pk


def test_a_home_grows_within_policy_and_the_claim_follows(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher
):
    sandbox = running_on_kube(**WHOLE)
    with pytest.raises(ValidationFailed, match="only grows"):
        home_resize(user=researcher, size_gb=40)
    with pytest.raises(ValidationFailed, match="200 GB at most"):
        home_resize(user=researcher, size_gb=201)
    run_jobs(lambda: home_resize(user=researcher, size_gb=80))
    reconcile_workload(sandbox.pk)  # the watch pass grows the claim (the fake expands at once)
    reconcile_workload(sandbox.pk)  # and reads the new size
    home = Home.objects.get(user=researcher)
    assert (
        fake_kube.get("PersistentVolumeClaim", "home", sandbox.namespace)["spec"]["resources"]["requests"][
            "storage"
        ]
        == "80Gi"
    )
    assert (home.size_gb, home.provisioned_gb) == (80, 80)
    holds = StorageHold.objects.filter(user=researcher).order_by("started_at")
    assert [(h.size_gb, h.ended_at is None) for h in holds] == [(50, False), (80, True)]
    assert holds[0].ended_at == holds[1].started_at  # billed without a gap or an overlap


def test_a_home_is_deleted_only_when_no_sandbox_holds_it_and_its_owner_types_their_name(
    run_jobs, fake_kube: FakeKube, running_on_kube, researcher
):
    sandbox = running_on_kube(**WHOLE)
    home = Home.objects.get(user=researcher)
    with pytest.raises(Conflict, match="uses your home: end it first"):
        home_delete(user=researcher, confirm="alice")
    end(run_jobs, sandbox, researcher)
    with pytest.raises(ValidationFailed, match="Type your username"):
        home_delete(user=researcher, confirm="yes")
    assert Home.objects.get(pk=home.pk).state == Home.State.READY  # nothing changed

    run_jobs(lambda: home_delete(user=researcher, confirm="alice"))
    home.refresh_from_db()
    assert home.state == Home.State.DELETED
    assert fake_kube.get("PersistentVolume", home.volume_name) is None
    patches = [
        r for r in fake_kube.requests if r.resource == "persistentvolumes" and r.verb in ("patch", "delete")
    ]
    assert [r.verb for r in patches][-2:] == ["patch", "delete"]  # reclaim policy Delete, then the volume
    assert StorageHold.objects.get(user=researcher).ended_at is not None  # billing stopped
    next_one = running_on_kube(**{**WHOLE, "name": "after"})  # a new home for the next sandbox
    assert (
        Home.objects.filter(user=researcher).exclude(state=Home.State.DELETED).get().attached_to_id
        == next_one.pk
    )
    assert StorageHold.objects.filter(
        user=researcher, ended_at__isnull=True
    ).get().price_per_gb_month == Decimal("0.1000")


class _Prometheus(BaseHTTPRequestHandler):
    """A cluster's Prometheus, answering one query: the kubelet's used bytes of a claim."""

    used: dict[tuple[str, str], int] = {}
    queries: list[str] = []

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)["query"][0]
        _Prometheus.queries.append(query)
        result = [
            {"metric": {}, "value": [1764540000, str(used)]}
            for (namespace, claim), used in _Prometheus.used.items()
            if f'namespace="{namespace}"' in query and f'persistentvolumeclaim="{claim}"' in query
        ]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def prometheus(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.PORTAL_PROMETHEUS_URL = f"http://127.0.0.1:{server.server_address[1]}"
    get_driver.cache_clear()
    yield _Prometheus
    server.shutdown()
    _Prometheus.used.clear()
    _Prometheus.queries.clear()
    get_driver.cache_clear()


def test_a_homes_use_comes_from_the_clusters_prometheus(fake_kube, running_on_kube, researcher, prometheus):
    sandbox = running_on_kube(**WHOLE)
    prometheus.used[(sandbox.namespace, "home")] = 13_249_974_108  # 12.34 GiB
    Home.objects.filter(user=researcher).update(used_at=None)  # due for a reading
    reconcile_workload(sandbox.pk)
    home = Home.objects.get(user=researcher)
    assert home.used_gb == Decimal("12.34") and home.used_at is not None
    assert 'kubelet_volume_stats_used_bytes{namespace="' in prometheus.queries[-1]
    asked = len(prometheus.queries)
    reconcile_workload(sandbox.pk)  # read again in five minutes, not on every pass
    assert len(prometheus.queries) == asked


def test_without_a_sample_or_a_prometheus_a_homes_use_is_not_made_up(
    settings, fake_kube, running_on_kube, researcher, prometheus
):
    sandbox = running_on_kube(**WHOLE)  # Prometheus has no sample for the claim
    assert Home.objects.get(user=researcher).used_gb is None and prometheus.queries
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing listens there
    get_driver.cache_clear()
    Home.objects.filter(user=researcher).update(used_at=None)
    reconcile_workload(sandbox.pk)  # the reading fails: logged, the sandbox unharmed
    sandbox.refresh_from_db()
    home = Home.objects.get(user=researcher)
    assert home.used_gb is None and home.state == Home.State.READY
    assert home.used_at is not None  # asked: not again on every pass
    assert sandbox.state == "running" and sandbox.degraded_since is None


@pytest.mark.parametrize(
    ("quantity", "gib"),
    [("100Gi", 100), ("1Ti", 1024), ("50G", 46), ("2T", 1862), ("512Mi", 0), ("1048576Ki", 1), ("bogus", 0)],
)
def test_storage_quantities_read_as_whole_gib(quantity, gib):
    from workers.drivers.kubernetes_sandbox import _gigabytes

    assert _gigabytes(quantity) == gib


def test_a_sandbox_that_started_with_a_scratch_home_keeps_it(
    run_jobs, fake_kube, running_on_kube, request_on_kube, researcher
):
    first = running_on_kube(**WHOLE)
    fake_kube.fail_next(503, times=50, method="GET", path_contains="/pods")  # the second starts slowly
    second = request_on_kube(**{**WHOLE, "name": "second"})  # provisioning, with a scratch /home
    assert second.state == "provisioning" and second.namespace
    end(run_jobs, first, researcher)  # the home is free now, but the second was built without it
    fake_kube.api.failures.clear()
    reconcile_workload(second.pk)
    assert fake_kube.get("PersistentVolumeClaim", "home", second.namespace) is None
    assert fake_kube.get("StatefulSet", "sandbox", second.namespace)["spec"]["volumeClaimTemplates"]
    assert Home.objects.get(user=researcher).attached_to_id == first.pk


def test_trouble_with_a_home_is_recorded_and_leaves_its_sandbox_alone(fake_kube, running_on_kube, researcher):
    sandbox = running_on_kube(**WHOLE)
    Home.objects.filter(user=researcher).update(size_gb=80)  # to grow, so the watch reads the claim
    fake_kube.fail_next(403, times=3, method="GET", path_contains="/persistentvolumeclaims/home")
    reconcile_workload(sandbox.pk)
    sandbox.refresh_from_db()
    assert sandbox.state == "running" and sandbox.degraded_since is None
    assert "may not get persistentvolumeclaims" in Home.objects.get(user=researcher).last_error
