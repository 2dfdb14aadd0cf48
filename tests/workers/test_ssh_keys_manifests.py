"""A shell sandbox lets in its owner's SSH keys: the Secret `ssh-keys` (one authorized_keys line
per key), mounted read-only where sshd reads it at each login, kept current by the worker while
the sandbox runs without touching its pod. Its host key is a Secret of its own, made once."""

from __future__ import annotations

import base64

import kubernetes_validate
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_ssh_private_key

from portal.accounts.ssh_keys import ssh_key_add
from portal.audit.models import AuditEvent
from portal.sandboxes.models import SshHostKey
from portal.sandboxes.services import host_key, sandbox_ssh_host_key, sandbox_ssh_host_key_forget
from portal.workloads.models import Image
from tests.accounts.test_ssh_keys import ECDSA, ED25519
from tests.fakekube import SCHEMA_VERSION, fixtures
from tests.rows import make_deployment, make_sandbox
from tests.workers.test_manifests import by_kind, make_spec
from workers.manifests import workload_objects
from workers.manifests.workload import SSH_HOST_KEY_MOUNT, SSH_KEYS_MOUNT
from workers.reconcile.workloads import workload_spec

fake_kube = fixtures.fake_kube
KEYS = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILfZ1as802mKU9pp0LGJgYqFu8erGgUW9mo+a/Qrtw38",)


def _lines(secret: dict) -> str:
    return base64.b64decode(secret["data"]["authorized_keys"]).decode()


def test_a_shell_sandbox_mounts_its_owners_keys_where_its_ssh_server_reads_them():
    built = workload_objects(make_spec(image_kind="shell", ssh_keys=KEYS))
    objects = by_kind(built)

    secrets = {obj["metadata"]["name"]: obj for obj in built if obj["kind"] == "Secret"}
    assert list(secrets) == ["ssh-keys", "ssh-host-key"]
    secret = secrets["ssh-keys"]
    host_secret = secrets["ssh-host-key"]
    assert kubernetes_validate.validate(host_secret, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    assert _lines(secret) == f"{KEYS[0]}\n"
    assert kubernetes_validate.validate(secret, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    statefulset = objects["StatefulSet"]
    assert kubernetes_validate.validate(statefulset, SCHEMA_VERSION, strict=True) == SCHEMA_VERSION
    pod = statefulset["spec"]["template"]["spec"]
    assert {"name": "ssh-keys", "secret": {"secretName": "ssh-keys"}} in pod["volumes"]
    container = pod["containers"][0]
    assert {"name": "ssh-keys", "mountPath": SSH_KEYS_MOUNT, "readOnly": True} in container["volumeMounts"]
    script = container["command"][-1]
    # /home is group-writable under the pod's fsGroup: sshd's strict modes would refuse every key
    assert "-o StrictModes=no" in script
    # the portal's keys only, read from the Secret as mounted: nothing of the login from the home,
    # which those a web sandbox of the owner is shared with may write
    assert script.endswith(f"-o PermitUserRC=no -o AuthorizedKeysFile={SSH_KEYS_MOUNT}/authorized_keys")
    assert "authorized_keys" not in script.replace(f"{SSH_KEYS_MOUNT}/authorized_keys", "")
    # nor its host key, nor its pid file: the home holds nothing sshd reads or writes
    host_key = {"name": "ssh-host-key", "secret": {"secretName": "ssh-host-key", "defaultMode": 0o440}}
    assert host_key in pod["volumes"]
    assert {"name": "ssh-host-key", "mountPath": SSH_HOST_KEY_MOUNT, "readOnly": True} in container[
        "volumeMounts"
    ]
    assert f"-h {SSH_HOST_KEY_MOUNT}/ssh_host_ed25519_key " in script and "-o PidFile=none " in script
    assert script.count("/home") == 1 and "mkdir -p /home/.ssh; " in script  # for the user's own use


def test_without_keys_the_secret_is_there_empty_and_web_sandboxes_get_none():
    (empty,) = [
        obj
        for obj in workload_objects(make_spec(image_kind="shell"))
        if obj["metadata"]["name"] == "ssh-keys"
    ]
    assert _lines(empty) == ""
    assert "Secret" not in by_kind(workload_objects(make_spec(image_kind="jupyter", ssh_keys=KEYS)))


def test_a_key_added_while_it_runs_reaches_the_secret_and_leaves_the_pod_alone(fake_kube):
    from dataclasses import replace

    from workers.drivers.base import ClusterConfig
    from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions

    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    driver = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0)))
    spec = make_spec(image_kind="shell", ssh_keys=KEYS)
    driver.apply_workload(spec)
    statefulset = fake_kube.get("StatefulSet", "sandbox", spec.namespace)

    more = (*KEYS, "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY=")
    driver.refresh_access(replace(spec, ssh_keys=more))

    assert _lines(fake_kube.get("Secret", "ssh-keys", spec.namespace)) == "".join(f"{k}\n" for k in more)
    after = fake_kube.get("StatefulSet", "sandbox", spec.namespace)
    assert after["metadata"]["resourceVersion"] == statefulset["metadata"]["resourceVersion"]  # pod untouched
    patched = [(r.method, r.resource, r.name) for r in fake_kube.api.requests if r.method == "PATCH"]
    assert patched == [("PATCH", "secrets", "ssh-keys")]
    asked = len(fake_kube.api.requests)
    driver.refresh_access(replace(spec, ssh_keys=more))  # unchanged: the keys are read, nothing written
    again = [(r.method, r.resource, r.name) for r in fake_kube.api.requests[asked:]]
    assert again == [("GET", "secrets", "ssh-keys"), ("GET", "secrets", "ssh-host-key")]

    # Worker process A applied {k1}; B then {k1, k2}; k2 is removed, and A, whose last write was
    # {k1} again, takes the next pass: the key goes, whatever A remembers.
    a = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0)))
    b = KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0)))
    a.refresh_access(spec)
    b.refresh_access(replace(spec, ssh_keys=more))
    a.refresh_access(spec)
    assert _lines(fake_kube.get("Secret", "ssh-keys", spec.namespace)) == f"{KEYS[0]}\n"


def test_the_host_key_is_given_before_the_pod_and_left_alone_after(fake_kube):
    """The portal's key, as a Secret the pod mounts: applied again by another worker process, it
    is read and found equal, never written."""
    from workers.drivers.base import ClusterConfig
    from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions

    config = ClusterConfig(name="fake", driver="kubernetes", api_url=fake_kube.url)
    spec = make_spec(image_kind="shell", ssh_keys=KEYS)
    KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0))).apply_workload(spec)
    secret = fake_kube.get("Secret", "ssh-host-key", spec.namespace)
    assert base64.b64decode(secret["data"]["ssh_host_ed25519_key"]).decode() == spec.ssh_host_key
    statefulset = fake_kube.get("StatefulSet", "sandbox", spec.namespace)
    made = int(secret["metadata"]["resourceVersion"])
    assert made < int(statefulset["metadata"]["resourceVersion"])  # before the StatefulSet that mounts it

    KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0))).apply_workload(spec)
    assert fake_kube.get("Secret", "ssh-host-key", spec.namespace)["metadata"]["resourceVersion"] == str(made)
    assert not [r for r in fake_kube.api.requests if r.name == "ssh-host-key" and r.method == "PATCH"]
    web = make_spec(image_kind="jupyter", workload_id=43, namespace="sbx-vision-web-43")
    KubernetesDriver(config, KubernetesOptions(timeout=(2.0, 2.0))).apply_workload(web)
    assert fake_kube.get("Secret", "ssh-host-key", web.namespace) is None
    with pytest.raises(ValueError, match="needs its host key"):
        workload_objects(make_spec(image_kind="shell", ssh_host_key=""))


@pytest.mark.django_db
def test_a_shell_sandbox_keeps_one_host_key_for_its_life_and_forgets_it_at_the_end(
    fleet, researcher, team, monkeypatch
):
    shell = Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, image=shell, cluster=gpu.node.cluster)
    web = make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.last(), cluster=gpu.node.cluster)

    private = workload_spec(box).ssh_host_key
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert workload_spec(box).ssh_host_key == private  # the same at every spec
    assert workload_spec(web).ssh_host_key == ""
    kept = SshHostKey.objects.get(workload=box)
    loaded = load_ssh_private_key(private.encode(), password=None).public_key()
    assert kept.public_key == loaded.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    assert kept.public_key.startswith("ssh-ed25519 ") and kept.fingerprint.startswith("SHA256:")
    assert private not in repr(workload_spec(box))  # never in a log line

    # Two workers build its first spec at once: the one that loses the race takes the winner's key.
    other = make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.all()[1], image=shell)
    made = Ed25519PrivateKey.generate

    def the_other_worker_first():
        SshHostKey.objects.create(
            workload=other, private_key="theirs", public_key="ssh-ed25519 A", fingerprint="x"
        )
        return made()

    monkeypatch.setattr(
        host_key, "Ed25519PrivateKey", type("K", (), {"generate": staticmethod(the_other_worker_first)})
    )
    assert sandbox_ssh_host_key(sandbox_id=other.pk).private_key == "theirs"

    sandbox_ssh_host_key_forget(sandbox_id=box.pk)
    assert not SshHostKey.objects.filter(workload=box).exists()


@pytest.fixture
def ssh_box(fleet, researcher, team):
    """A running ssh sandbox of alice's on the first whole GPU."""
    shell = Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    gpu = fleet["whole"].gpus.first()
    return make_sandbox(owner=researcher, team=team, gpu=gpu, image=shell, cluster=gpu.node.cluster)


@pytest.mark.django_db
def test_a_host_key_is_made_only_while_placed_or_running_and_forgotten_once_ended(
    ssh_box, fleet, researcher, team
):
    from portal.sandboxes.services import sandbox_ssh_host_keys_prune
    from portal.workloads.models import WorkloadState

    box = ssh_box
    private = workload_spec(box).ssh_host_key
    box.state = WorkloadState.TERMINATING
    box.save(update_fields=["state"])
    assert workload_spec(box).ssh_host_key == private  # the one it had, to the end
    gone = make_sandbox(
        owner=researcher,
        team=team,
        gpu=fleet["whole"].gpus.last(),
        image=box.image,
        state=WorkloadState.TERMINATING,
    )
    assert workload_spec(gone).ssh_host_key == "" and not SshHostKey.objects.filter(workload=gone).exists()

    box.state = WorkloadState.FAILED  # ended without the teardown that forgets it
    box.save(update_fields=["state"])
    assert sandbox_ssh_host_keys_prune() == 1 and not SshHostKey.objects.exists()


@pytest.mark.django_db
def test_a_host_key_that_no_longer_decrypts_is_made_anew_not_handed_out(ssh_box):
    box = ssh_box
    first = workload_spec(box).ssh_host_key
    # the field reads back its ciphertext when SECRET_KEY was rotated without a fallback: a value
    # that is no key stands for it here
    SshHostKey.objects.filter(workload=box).update(private_key="gAAAAABk-not-decryptable")
    again = workload_spec(box).ssh_host_key
    assert again.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and again != first


@pytest.mark.django_db
def test_the_worker_gives_a_shell_sandbox_its_owners_keys_and_no_one_elses(fleet, researcher, lead, team):
    ssh_key_add(user=researcher, name="laptop", public_key=ED25519)
    ssh_key_add(user=researcher, name="desktop", public_key=ECDSA)
    ssh_key_add(user=lead, name="bob's", public_key=ED25519)
    shell = Image.objects.filter(kind=Image.Kind.SHELL).first() or Image.objects.create(
        slug="shell", name="Shell", container_image="ubuntu-sshd", kind=Image.Kind.SHELL
    )
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, image=shell, cluster=gpu.node.cluster)
    web = make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.last(), cluster=gpu.node.cluster)

    keys = workload_spec(box).ssh_keys

    assert keys == (ED25519.rsplit(" ", 1)[0], ECDSA.strip())
    assert workload_spec(web).ssh_keys == ()


@pytest.mark.django_db
def test_a_running_sandboxs_watch_refreshes_its_access_never_its_pod(fleet, researcher, team, monkeypatch):
    from workers.drivers.base import WorkloadStatus
    from workers.reconcile import workloads as reconcile

    applied: list = []

    class Cluster:
        def restart_workload(self, spec):
            raise AssertionError("no restart was asked for")

        def workload_status(self, spec):
            return WorkloadStatus("running", "running")

        def apply_workload(self, spec):
            raise AssertionError("a running sandbox's pod is never applied again from its watch")

        def refresh_access(self, spec):
            applied.append(spec)
            return True

    monkeypatch.setattr(reconcile, "observe_home", lambda *args: None)
    shell = Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, image=shell, cluster=gpu.node.cluster)
    web = make_sandbox(owner=researcher, team=team, gpu=fleet["whole"].gpus.last(), cluster=gpu.node.cluster)
    ssh_key_add(user=researcher, name="laptop", public_key=ED25519)

    for workload in (box, web):
        reconcile._watch_sandbox(Cluster(), workload, workload_spec(workload), workload.started_at)

    assert [spec.workload_id for spec in applied] == [box.pk, web.pk]  # the web one for its route
    assert applied[0].ssh_keys == (ED25519.rsplit(" ", 1)[0],) and applied[1].ssh_keys == ()
    membership = researcher.memberships.get(team=team)
    membership.delete()
    assert workload_spec(box).ssh_keys == ()  # the keys of an owner who left the team open nothing
    membership.save()
    assert workload_spec(box).ssh_keys == applied[0].ssh_keys  # back in the team
    researcher.is_active = False
    researcher.save(update_fields=["is_active"])
    assert workload_spec(box).ssh_keys == ()  # a deactivated owner's keys open nothing


@pytest.fixture
def catalog(db):
    from portal.catalog.demo import catalog_seed

    catalog_seed()


@pytest.mark.django_db
def test_a_running_deployments_watch_refreshes_its_route(fleet, catalog, researcher, team):
    from workers.drivers.base import WorkloadStatus
    from workers.reconcile import workloads as reconcile

    refreshed: list = []

    class Cluster:
        def workload_status(self, spec):
            return WorkloadStatus("running", "running", ready_replicas=1)

        def apply_workload(self, spec):
            raise AssertionError("a running deployment's replicas are never applied again from its watch")

        def refresh_access(self, spec):
            refreshed.append(spec.workload_id)
            return True

    deployment = make_deployment(owner=researcher, team=team, gpu=fleet["whole"].gpus.first())

    reconcile._watch_serving(Cluster(), deployment, workload_spec(deployment), deployment.started_at)

    assert refreshed == [deployment.pk]


@pytest.mark.django_db
def test_a_deployments_failed_refresh_speaks_of_its_endpoint(
    fleet, catalog, researcher, team, researcher_client
):
    from workers.drivers.base import DriverError, WorkloadStatus
    from workers.reconcile import workloads as reconcile

    class Cluster:
        def workload_status(self, spec):
            return WorkloadStatus("running", "running", ready_replicas=1)

        def refresh_access(self, spec):
            raise DriverError('ingresses.networking.k8s.io "model" is forbidden', retryable=False)

    deployment = make_deployment(owner=researcher, team=team, gpu=fleet["whole"].gpus.first())
    reconcile._watch_serving(Cluster(), deployment, workload_spec(deployment), deployment.started_at)

    page = researcher_client.get(f"/deployments/{deployment.number}/").content.decode()
    assert (
        "Its endpoint's route or quota could not be updated" in page
        and '"model" is forbidden' in page.replace("&quot;", '"')
    )


@pytest.mark.django_db
def test_a_failed_refresh_is_logged_and_the_health_reading_stands(
    fleet, researcher, team, monkeypatch, caplog
):
    from portal.workloads.models import Workload
    from workers.drivers.base import DriverError, WorkloadStatus
    from workers.reconcile import workloads as reconcile

    class Cluster:
        def workload_status(self, spec):
            return WorkloadStatus("running", "running")

        def refresh_access(self, spec):
            raise DriverError('secrets "ssh-keys" is forbidden', retryable=False)

    monkeypatch.setattr(reconcile, "observe_home", lambda *args: None)
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, cluster=gpu.node.cluster)
    Workload.objects.filter(pk=box.pk).update(next_attempt_at=None)

    reconcile._watch_sandbox(Cluster(), box, workload_spec(box), box.started_at)

    box.refresh_from_db()
    assert box.state == "running" and "Retrying" not in box.message
    assert box.next_attempt_at is not None  # watched again as usual
    assert "its route or keys" in caplog.text
    assert box.access_problem == 'secrets "ssh-keys" is forbidden'  # shown on its page, not only logged
    reconcile._watch_sandbox(Cluster(), box, workload_spec(box), box.started_at)
    assert [e.detail for e in AuditEvent.objects.filter(action="sandbox.access_failed")] == [
        box.access_problem
    ]


@pytest.mark.django_db
def test_a_failed_refresh_shows_on_the_page_and_in_the_api_until_a_checked_one_goes_well(
    fleet, researcher, team, researcher_client, monkeypatch
):
    from workers.drivers.base import DriverError, WorkloadStatus
    from workers.reconcile import workloads as reconcile

    cluster_says: list = [DriverError('secrets "ssh-keys" is forbidden', retryable=False)]

    class Cluster:
        def workload_status(self, spec):
            return WorkloadStatus("running", "running")

        def refresh_access(self, spec):
            said = cluster_says.pop(0)
            if isinstance(said, DriverError):
                raise said
            return said

    def watch() -> None:
        box.refresh_from_db()
        reconcile._watch_sandbox(Cluster(), box, workload_spec(box), box.started_at)

    def problem() -> str:
        return researcher_client.get(f"/api/v1/sandboxes/{box.number}").json()["access_problem"]

    monkeypatch.setattr(reconcile, "observe_home", lambda *args: None)
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, cluster=gpu.node.cluster)
    watch()

    page = researcher_client.get(f"/sandboxes/{box.number}/").content.decode()
    assert 'id="access-problem"' in page and "is forbidden" in page
    body = researcher_client.get(f"/api/v1/sandboxes/{box.number}").json()
    assert body["access_problem"] == 'secrets "ssh-keys" is forbidden' and body["state"] == "running"

    cluster_says.append(DriverError("the API server timed out", retryable=True))
    watch()
    assert problem() == 'secrets "ssh-keys" is forbidden'  # a passing error is only logged
    cluster_says.append(False)  # skipped as unchanged by a process whose own apply went well
    watch()
    assert problem() == 'secrets "ssh-keys" is forbidden'  # its word does not clear another's failure
    cluster_says.append(True)  # applied and read now
    watch()
    assert problem() == ""
    assert 'id="access-problem"' not in researcher_client.get(f"/sandboxes/{box.number}/").content.decode()


@pytest.mark.django_db
def test_a_stale_access_problem_goes_when_it_runs_again_or_serves_nothing(
    fleet, catalog, researcher, team, monkeypatch
):
    from portal.workloads.models import Workload
    from portal.workloads.services import workload_mark_running
    from workers.reconcile import workloads as reconcile

    stale = "the cluster rejected patch ingresses/model"
    deployment = make_deployment(owner=researcher, team=team, gpu=fleet["whole"].gpus.first())
    Workload.objects.filter(pk=deployment.pk).update(access_problem=stale, state="provisioning")
    workload_mark_running(workload_id=deployment.pk, access=deployment.access, now=deployment.started_at)
    deployment.refresh_from_db()
    assert deployment.state == "running" and deployment.access_problem == ""  # applied whole: route and all

    Workload.objects.filter(pk=deployment.pk).update(access_problem=stale, replicas=0)
    deployment.refresh_from_db()
    reconcile._watch_serving(object(), deployment, workload_spec(deployment), deployment.started_at)
    deployment.refresh_from_db()
    assert deployment.access_problem == ""  # scaled to zero: nothing is refreshed, nothing to warn of


@pytest.mark.django_db
def test_a_restart_applies_the_sandbox_as_the_portal_makes_it_now_then_replaces_its_pod(
    fleet, researcher, team, monkeypatch
):
    from django.utils import timezone

    from workers.reconcile import workloads as reconcile

    steps: list[str] = []

    class Cluster:
        def apply_workload(self, spec):
            steps.append("apply")

        def restart_workload(self, spec):
            steps.append("restart")

    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, cluster=gpu.node.cluster)
    box.restart_requested_at = timezone.now()

    reconcile._watch_sandbox(Cluster(), box, workload_spec(box), timezone.now())

    assert steps == ["apply", "restart"]
