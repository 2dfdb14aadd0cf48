"""Team datasets mounted read-only at /data/<slug>, end to end over HTTP against the fake API
server: an NFS export through the NFS CSI driver, a bucket with its credentials copied in, and an
existing claim's volume copied read-only into the sandbox's namespace (and removed after)."""

from __future__ import annotations

import pytest

from portal.core.errors import ValidationFailed
from portal.sandboxes.models import Dataset
from portal.sandboxes.services import sandbox_request
from portal.workloads.models import Workload, WorkloadState
from portal.workloads.services import workload_terminate
from tests.fakekube import FakeKube
from tests.fakekube.resources import BY_KIND
from tests.workers.conftest import WHOLE

pytestmark = pytest.mark.django_db


def dataset(team, **fields) -> Dataset:
    made = Dataset.objects.create(**fields)
    made.teams.add(team)
    return made


def pod_of(fake_kube: FakeKube, sandbox: Workload) -> dict:
    return fake_kube.get("Pod", "sandbox-0", sandbox.namespace)


def test_an_nfs_export_is_a_read_only_csi_volume_at_data_slug(fake_kube, request_on_kube, team):
    dataset(
        team,
        slug="imagenet",
        name="ImageNet",
        kind="nfs",
        nfs_server="nfs.internal",
        nfs_path="/export/imagenet",
    )
    sandbox = request_on_kube(**WHOLE, datasets=["imagenet"])
    pod = pod_of(fake_kube, sandbox)  # admitted under Pod Security "restricted"
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "data-imagenet")
    assert volume["csi"] == {
        "driver": "nfs.csi.k8s.io",
        "readOnly": True,
        "volumeAttributes": {"server": "nfs.internal", "share": "/export/imagenet"},
    }
    mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "data-imagenet")
    assert mount == {"name": "data-imagenet", "mountPath": "/data/imagenet", "readOnly": True}


def test_a_bucket_gets_its_credentials_copied_in_or_fails_saying_which_are_missing(
    fake_kube, request_on_kube, team
):
    dataset(
        team, slug="laion", name="LAION", kind="bucket", csi_driver="s3.csi.aws.com", bucket="laion-5b",
        volume_attributes={"region": "eu-west-1"}, credentials_secret="laion-reader",
    )  # fmt: skip
    with fake_kube.store.lock:
        fake_kube.api.create(BY_KIND["Secret"], "gpu-portal-datasets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "laion-reader", "namespace": "gpu-portal-datasets"},
            "data": {"AWS_ACCESS_KEY_ID": "QUtJQQ==", "AWS_SECRET_ACCESS_KEY": "c2VjcmV0"},
        })  # fmt: skip
    sandbox = request_on_kube(**WHOLE, datasets=["laion"])
    copied = fake_kube.get("Secret", "dataset-laion", sandbox.namespace)
    assert copied["data"] == {"AWS_ACCESS_KEY_ID": "QUtJQQ==", "AWS_SECRET_ACCESS_KEY": "c2VjcmV0"}
    volume = next(v for v in pod_of(fake_kube, sandbox)["spec"]["volumes"] if v["name"] == "data-laion")
    assert volume["csi"]["volumeAttributes"] == {"bucketName": "laion-5b", "region": "eu-west-1"}
    assert (
        volume["csi"]["nodePublishSecretRef"] == {"name": "dataset-laion"}
        and volume["csi"]["readOnly"] is True
    )

    Dataset.objects.filter(slug="laion").update(credentials_secret="gone")
    failed = request_on_kube(**{**WHOLE, "name": "other"}, datasets=["laion"])
    assert failed.state == WorkloadState.FAILED
    assert (
        "dataset laion: no Secret gone in namespace gpu-portal-datasets holds its credentials"
        in failed.message
    )


def test_an_existing_claim_is_copied_read_only_and_the_copy_goes_with_the_sandbox(
    run_jobs, fake_kube, request_on_kube, team, researcher
):
    with fake_kube.store.lock:  # the team's data on a claim of a namespace of its own
        fake_kube.api.create(
            BY_KIND["Namespace"],
            "",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision-data"}},
        )
        fake_kube.api.create(BY_KIND["PersistentVolumeClaim"], "vision-data", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "corpus", "namespace": "vision-data"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "2Ti"}}},
        })  # fmt: skip
    source = fake_kube.get("PersistentVolumeClaim", "corpus", "vision-data")["spec"]["volumeName"]
    dataset(
        team, slug="corpus", name="Corpus", kind="pvc", claim_namespace="vision-data", claim_name="corpus"
    )
    sandbox = request_on_kube(**WHOLE, datasets=["corpus"])
    copy = fake_kube.get("PersistentVolume", f"ds-corpus-{sandbox.pk}")
    original = fake_kube.get("PersistentVolume", source)
    assert copy["spec"]["csi"] == {**original["spec"]["csi"], "readOnly": True}  # the same storage, read-only
    assert (
        copy["spec"]["accessModes"] == ["ReadOnlyMany"]
        and copy["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    )
    claim = fake_kube.get("PersistentVolumeClaim", "dataset-corpus", sandbox.namespace)
    assert claim["status"]["phase"] == "Bound" and claim["spec"]["volumeName"] == f"ds-corpus-{sandbox.pk}"
    volume = next(v for v in pod_of(fake_kube, sandbox)["spec"]["volumes"] if v["name"] == "data-corpus")
    assert volume["persistentVolumeClaim"] == {"claimName": "dataset-corpus", "readOnly": True}
    quota = fake_kube.get("ResourceQuota", "sandbox-quota", sandbox.namespace)["spec"]["hard"]
    assert quota["persistentvolumeclaims"] == "2"  # /home and the dataset

    run_jobs(lambda: workload_terminate(user=researcher, workload_id=sandbox.pk, kind="sandbox"))
    assert fake_kube.get("PersistentVolume", f"ds-corpus-{sandbox.pk}") is None  # the copy went
    assert fake_kube.get("PersistentVolume", source) is not None  # the team's data did not


def test_a_dataset_the_team_may_not_mount_is_refused_and_nothing_is_made(
    fake_kube, kube_cluster, researcher, other_team
):
    dataset(other_team, slug="secret-data", name="NLP's", kind="nfs", nfs_server="nfs", nfs_path="/x")
    before = Workload.objects.count()
    with pytest.raises(ValidationFailed, match="Team vision may not mount: secret-data, unknown"):
        sandbox_request(user=researcher, **WHOLE, datasets=["secret-data", "unknown"])
    assert Workload.objects.count() == before
