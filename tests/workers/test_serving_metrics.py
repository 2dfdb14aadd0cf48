"""Reading model servers' runtime metrics: the Kubernetes driver over HTTP through the API
server's pod proxy, replica by replica and on each runtime's metrics port; the simulated driver's
believable, ever-growing counters; and the minute job that records them."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.deployments.models import Serving, ServingMinute
from portal.deployments.services import deployment_request
from portal.workloads.models import Workload, WorkloadState
from tests.deployments import conftest as deployment_fixtures
from tests.fakekube import FakeKube, fixtures
from tests.workers.test_manifests import make_serving_spec
from workers.drivers.base import DriverError
from workers.drivers.kubernetes import KubernetesDriver
from workers.drivers.simulated import SimulatedDriver
from workers.reconcile.clusters import driver_for
from workers.reconcile.serving_metrics import read_deployment_metrics
from workers.reconcile.workloads import reconcile_workload
from workers.simstore import DatabaseObjectStore
from workers.tasks.deployments import read_serving_metrics_all

catalog = deployment_fixtures.catalog
kube_driver = fixtures.kube_driver  # the fixture, where pytest looks for it
VLLM_PAGE = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{model_name="m"} %s\n'


def replica_pods(fake: FakeKube, namespace: str) -> list[str]:
    return sorted(pod["metadata"]["name"] for pod in fake.list("Pod", namespace))


def test_each_ready_replica_is_read_through_the_pod_proxy_on_its_metrics_port(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
):
    spec = make_serving_spec(replicas=2)
    kube_driver.apply_workload(spec)
    first, second = replica_pods(fake_kube, spec.namespace)
    assert kube_driver.serving_metrics(spec) == {first: None, second: None}  # starting: not ready
    fake_kube.pod_running(spec.namespace, name=first)
    fake_kube.pod_running(spec.namespace, name=second)
    fake_kube.serve_pod_http(spec.namespace, first, port=8000, path="metrics", text=VLLM_PAGE % 12)
    # the second is ready but its server does not answer (the API server says 503): None, not an error
    assert kube_driver.serving_metrics(spec) == {first: VLLM_PAGE % 12, second: None}
    proxied = [r for r in fake_kube.requests if r.resource == "pods/proxy"]
    assert {(r.verb, r.group, r.name, r.status) for r in proxied} == {
        ("get", "", f"{first}:8000", 200),
        ("get", "", f"{second}:8000", 503),
    }


def test_a_triton_server_is_read_on_its_metrics_port(fake_kube: FakeKube, kube_driver: KubernetesDriver):
    spec = make_serving_spec(replicas=1)
    assert spec.serving is not None
    triton = dataclasses.replace(
        spec,
        serving=dataclasses.replace(
            spec.serving,
            runtime="triton",
            command=("tritonserver", "--model-repository=s3://models/triton", "--http-port", "8000"),
        ),
    )
    kube_driver.apply_workload(triton)
    (pod,) = replica_pods(fake_kube, triton.namespace)
    fake_kube.pod_running(triton.namespace, name=pod)
    fake_kube.serve_pod_http(triton.namespace, pod, port=8000, path="metrics", text="wrong port\n")
    fake_kube.serve_pod_http(triton.namespace, pod, port=8002, path="metrics", text="nv_inference_count 1\n")
    assert kube_driver.serving_metrics(triton) == {pod: "nv_inference_count 1\n"}


def test_a_portal_without_pods_proxy_fails_the_read_saying_so(
    fake_kube: FakeKube, kube_driver: KubernetesDriver
):
    spec = make_serving_spec(replicas=1)
    kube_driver.apply_workload(spec)
    (pod,) = replica_pods(fake_kube, spec.namespace)
    fake_kube.pod_running(spec.namespace, name=pod)
    fake_kube.fail_next(403, path_contains="/proxy/")
    with pytest.raises(DriverError, match="may not get pods"):
        kube_driver.serving_metrics(spec)


@pytest.mark.django_db
def test_the_minute_job_records_a_running_deployments_growth_on_kubernetes(
    run_jobs, fake_kube, kube_cluster, catalog, researcher
):
    deployment = run_jobs(
        lambda: deployment_request(
            user=researcher, team="vision", name="llama8b", model="llama-3.1-8b-instruct",
            gpu_type="h100-80gb", count=1,
        )
    )  # fmt: skip
    namespace = Workload.objects.get(pk=deployment.pk).namespace
    (pod,) = replica_pods(fake_kube, namespace)
    fake_kube.pod_running(namespace, name=pod)
    reconcile_workload(deployment.pk)
    assert Workload.objects.get(pk=deployment.pk).state == WorkloadState.RUNNING
    now = timezone.now()
    fake_kube.serve_pod_http(namespace, pod, port=8000, path="metrics", text=VLLM_PAGE % 1000)
    assert read_deployment_metrics(deployment.pk, now=now)
    fake_kube.serve_pod_http(namespace, pod, port=8000, path="metrics", text=VLLM_PAGE % 46000)
    assert read_deployment_metrics(deployment.pk, now=now + timedelta(seconds=60))
    (row,) = ServingMinute.objects.filter(workload_id=deployment.pk)
    assert row.seconds == 60.0 and row.generated_tokens == 45000.0
    fake_kube.fail_next(500, path_contains="/pods", method="GET")  # the cluster does not answer
    assert not read_deployment_metrics(deployment.pk, now=now + timedelta(seconds=120))
    assert "failed to list pods" in Serving.objects.get(workload_id=deployment.pk).metrics_error


# --- the simulated cluster ---------------------------------------------------------------------------


@pytest.fixture
def simulated(db):
    """A simulated cluster whose clock the test moves; pods start at once."""
    driver = SimulatedDriver(store=DatabaseObjectStore("sim-serving"), pod_start_seconds=0)
    driver.clock = timezone.now
    return driver


def tokens(driver: SimulatedDriver, spec, at) -> float:
    from portal.deployments.runtime_metrics import runtime_counters

    driver.clock = lambda: at
    (text,) = driver.serving_metrics(spec).values()
    return runtime_counters(spec.serving.runtime or "vllm", text)["generated_tokens"]


def test_simulated_counters_grow_busy_fast_and_idle_slowly_and_restart_from_zero(simulated):
    busy = make_serving_spec(replicas=1, workload_id=300)  # 300 % 3 == 0: busy
    idle = make_serving_spec(replicas=1, workload_id=301, namespace="sbx-vision-idle-301")  # idle
    simulated.apply_workload(busy)
    simulated.apply_workload(idle)
    start = timezone.now()
    readings = [tokens(simulated, busy, start + timedelta(minutes=m)) for m in (10, 11, 12)]
    assert readings == sorted(readings) and readings[1] - readings[0] > 500 * 60  # ~760 tokens/s
    assert (
        tokens(simulated, idle, start + timedelta(minutes=11))
        - tokens(simulated, idle, start + timedelta(minutes=10))
        < 2 * 380
    )  # a request every ten minutes or so
    # the replica is made again (a restart): its counters start from zero
    simulated.delete_workload(busy)
    simulated.apply_workload(busy)
    assert tokens(simulated, busy, timezone.now() + timedelta(seconds=30)) < readings[0]


def test_a_simulated_replica_still_starting_has_nothing_to_say(simulated):
    spec = make_serving_spec(replicas=2, workload_id=303)
    simulated.pod_start_seconds = 60
    simulated.apply_workload(spec)
    assert simulated.serving_metrics(spec) == {"serve-0-sim": None, "serve-1-sim": None}
    tgi = dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, runtime="tgi"))
    simulated.clock = lambda: timezone.now() + timedelta(minutes=5)
    pages = simulated.serving_metrics(tgi)
    assert set(pages) == {"serve-0-sim", "serve-1-sim"}
    assert all(
        "tgi_request_success " in page and "time_to_first_token" not in page for page in pages.values()
    )


def test_a_simulated_embedding_model_reads_prompts_and_generates_no_token(simulated):
    from portal.deployments.runtime_metrics import runtime_counters

    llm = make_serving_spec(replicas=1, workload_id=300)
    embedder = dataclasses.replace(
        llm, namespace="sbx-vision-embed-303", serving=dataclasses.replace(llm.serving, task="embedding")
    )
    simulated.apply_workload(embedder)
    simulated.clock = lambda: timezone.now() + timedelta(minutes=10)
    (page,) = simulated.serving_metrics(embedder).values()
    counters = runtime_counters("vllm", page)
    assert counters["generated_tokens"] == 0 and counters["requests"] > 0
    assert counters["prompt_tokens"] == 250 * counters["requests"]
    # its one output is its first token: the time to first token is the whole latency
    assert counters["ttft_sum"] == pytest.approx(counters["latency_sum"])


@pytest.mark.django_db
def test_the_beat_reads_every_running_deployment_of_the_simulated_cluster(
    run_jobs, fleet, catalog, researcher
):
    deployment = run_jobs(
        lambda: deployment_request(
            user=researcher,
            team="vision",
            name="chat",
            model="llama-3.1-8b-instruct",
            gpu_type="h100-80gb",
            count=1,
        )
    )
    deployment.refresh_from_db()
    assert deployment.state == WorkloadState.RUNNING
    driver = driver_for(deployment.cluster)
    later = timezone.now() + timedelta(minutes=30)
    driver.clock = lambda: later
    read_serving_metrics_all.delay()  # the baseline
    driver.clock = lambda: later + timedelta(seconds=60)
    read_deployment_metrics(deployment.pk, now=timezone.now() + timedelta(seconds=60))
    row = ServingMinute.objects.get(workload_id=deployment.pk)
    assert row.generated_tokens is not None and row.ttft_count is not None
    assert row.generated_tokens == 380 * row.requests  # the simulated server's tokens per request
