"""The fake's pod admission refuses what a real API server would: Pod Security `restricted`
violations, and pods past a ResourceQuota or naming no cpu or memory where one is capped."""

from __future__ import annotations

import pytest

from tests.fakekube import FakeKube
from tests.fakekube.errors import ApiError
from tests.fakekube.resources import BY_KIND
from tests.workers.test_manifests import make_spec
from workers.manifests import workload_objects

SECURE = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip


def pod(name: str, cpu: str = "1", security: dict | None = None, **spec: object) -> dict:
    container = {
        "name": "main", "image": "busybox",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}},
        "securityContext": SECURE if security is None else security,
    }  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container], **spec},
    }


@pytest.fixture
def fake() -> FakeKube:
    fake = FakeKube(nodes=[])
    with fake.store.lock:
        for obj in workload_objects(make_spec()):  # the sandbox's namespace, quota and limits
            if obj["kind"] in ("Namespace", "ResourceQuota", "LimitRange"):
                fake.api.create(BY_KIND[obj["kind"]], obj["metadata"].get("namespace", ""), obj)
    return fake


def create(fake: FakeKube, body: dict) -> None:
    with fake.store.lock:
        fake.api.create(BY_KIND["Pod"], make_spec().namespace, body)


def test_a_privileged_or_root_pod_is_refused_under_restricted(fake: FakeKube) -> None:
    with pytest.raises(ApiError) as refused:
        create(fake, pod("root", security={"privileged": True}))
    assert refused.value.code == 403
    assert 'violates PodSecurity "restricted:latest"' in str(refused.value)
    with pytest.raises(ApiError, match="host namespaces"):
        create(fake, pod("host", hostNetwork=True))


def test_a_pod_past_the_quota_is_refused(fake: FakeKube) -> None:
    spec = make_spec()
    create(fake, pod("first", cpu=str(spec.cpu)))  # the whole allocation
    with pytest.raises(
        ApiError, match=r"exceeded quota: sandbox-quota, requested: requests.cpu=1, used: requests.cpu=8"
    ):
        create(fake, pod("second", cpu="1"))


def test_a_pod_asking_for_more_cpu_than_the_quota_is_refused(fake: FakeKube) -> None:
    with pytest.raises(ApiError, match=r"exceeded quota: sandbox-quota, requested: requests.cpu=999"):
        create(fake, pod("greedy", cpu="999"))
