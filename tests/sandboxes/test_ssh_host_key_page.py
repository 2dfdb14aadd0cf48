"""An ssh sandbox's page and the API give its server's host key fingerprint, so that its owner can
check what ssh shows on first connecting: the key the portal made and gave the cluster."""

from __future__ import annotations

import pytest

from portal.sandboxes.models import SshHostKey
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Image, Workload, WorkloadState

pytestmark = pytest.mark.django_db


@pytest.fixture
def shell_image(db):
    return Image.objects.create(
        slug="shell", name="Shell (SSH)", container_image="sshd", kind=Image.Kind.SHELL
    )


def test_the_owner_reads_the_host_key_fingerprint_on_the_page_and_in_the_api(
    run_jobs,
    fleet,
    researcher,
    researcher_client,
    alice,
    slice_request,
    shell_image,
    django_assert_max_num_queries,
):
    box = run_jobs(lambda: sandbox_request(user=researcher, image="shell", **slice_request))
    assert Workload.objects.get(pk=box.pk).state == WorkloadState.RUNNING
    key = SshHostKey.objects.get(workload=box)
    assert key.fingerprint.startswith("SHA256:") and key.public_key.startswith("ssh-ed25519 ")

    page = researcher_client.get(f"/sandboxes/{box.number}/").content.decode()
    assert (
        f'ssh should show this host key: <code class="wrap-anywhere">ED25519 {key.fingerprint}</code>' in page
    )
    detail = alice.get(f"/api/v1/sandboxes/{box.number}").json()
    assert detail["ssh_host_key"] == {"public_key": key.public_key, "fingerprint": key.fingerprint}

    web = run_jobs(lambda: sandbox_request(user=researcher, **{**slice_request, "name": "web"}))
    assert alice.get(f"/api/v1/sandboxes/{web.number}").json()["ssh_host_key"] is None
    assert 'id="ssh-host-key"' not in researcher_client.get(f"/sandboxes/{web.number}/").content.decode()
    for n in range(6):  # more ssh sandboxes: the list reads their keys in one query
        run_jobs(
            lambda n=n: sandbox_request(user=researcher, image="shell", **{**slice_request, "name": f"s{n}"})
        )
    with django_assert_max_num_queries(10):  # as many for 4 ssh sandboxes as for 7
        listed = alice.get("/api/v1/sandboxes").json()["results"]
    assert sum(1 for row in listed if row["ssh_host_key"]) == 7
    Workload.objects.filter(pk=box.pk).update(state=WorkloadState.TERMINATED)
    assert alice.get(f"/api/v1/sandboxes/{box.number}").json()["ssh_host_key"] is None  # once ended
