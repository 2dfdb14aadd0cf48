"""The sandbox's workload: a one-replica StatefulSet pinned to the placed node, and its Service.

Why a StatefulSet and not a bare Pod + PVC: a controller brings the pod back after an eviction,
a node reboot or a MIG reconfiguration on the node (the MIG manager evicts GPU clients), and the
`volumeClaimTemplates` PVC keeps /home across those restarts. Its pod template can also be patched
(image, resources), where a bare pod's spec is immutable.
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

from workers.manifests.claims import claim_name, claim_pod_spec, uses_dra
from workers.manifests.datasets import add_datasets
from workers.manifests.names import (
    HOME_OWNER_KEY,
    WORKLOAD_NAME,
    label_value,
    object_meta,
    selector_labels,
    workload_labels,
)
from workers.manifests.options import ManifestOptions
from workers.manifests.pods import (
    container_security_context,
    pinned_pod_spec,
    shm_mount,
    shm_volume,
    tolerate_gpu_taint,
)
from workers.manifests.policy import (
    JUPYTER_PORT,
    SHELL_PORT,
    cpu_quantity,
    gib_quantity,
    sandbox_port,
)
from workers.spec import WorkloadSpec

HOME = "/home"
HOME_VOLUME = "home"

# The shell image contract: OpenSSH's sshd on the PATH, and uid run_as_user known
# by the name in $SANDBOX_USER. sshd runs as that non-root user on an unprivileged port, so only
# that user can log in, with the keys they gave the portal: read by sshd at each login from the
# Secret `ssh-keys` as mounted (the kubelet updates a mounted Secret in place while the sandbox
# runs), and no others. Nothing of its login may come from the home, which whoever the owner
# shares a web sandbox with may write (the home is mounted there too): not
# ~/.ssh/authorized_keys, nor a copy of the keys kept there, nor ~/.ssh/rc (PermitUserRC=no),
# any of which would let them into the owner's ssh sandboxes after the share ends. Public keys
# need no secrecy; a Secret because the portal's rights on Secrets are already held to its own
# namespaces.
# StrictModes is off: the kubelet makes a volume's root group-writable for the pod's fsGroup
# (setgid, g+rwx), and sshd's strict modes refuse keys under a group-writable /home. The group is
# the sandbox user's own and sshd runs as that one user, so nobody else could have written them.
# The server's own host key is not in the home either, where a sharee could read it (and pose as
# the sandbox to its owner's ssh client) or replace it: the portal makes one per sandbox, keeps it
# (its page shows the fingerprint) and gives it as the Secret `ssh-host-key`, the same for the
# sandbox's life, so clients' known_hosts stay right across restarts.
# The kubelet writes a Secret's files as root with the pod's fsGroup (the sandbox user's group)
# able to read them; sshd's check that a private key is not readable by others applies to keys
# its own user owns, so it takes that file as mounted. No pid file: it would be written in a
# writable place, and sshd -D in the foreground needs none.
SSH_KEYS_SECRET = "ssh-keys"  # noqa: S105 (the object's name)
SSH_KEYS_MOUNT = "/etc/gpu-portal/ssh"
SSH_HOST_KEY_SECRET = "ssh-host-key"  # noqa: S105 (the object's name)
SSH_HOST_KEY_MOUNT = "/etc/gpu-portal/ssh-host"
SSH_HOST_KEY_FILE = "ssh_host_ed25519_key"
SHELL_SERVER_SCRIPT = (
    "set -eu; "
    f"mkdir -p {HOME}/.ssh; "
    f"exec sshd -D -e -p {SHELL_PORT} -h {SSH_HOST_KEY_MOUNT}/{SSH_HOST_KEY_FILE} "
    "-o PidFile=none -o UsePAM=no -o PasswordAuthentication=no -o StrictModes=no "
    f"-o PermitUserRC=no -o AuthorizedKeysFile={SSH_KEYS_MOUNT}/authorized_keys"
)


def ssh_host_key_secret(spec: WorkloadSpec) -> dict:
    """A shell sandbox's ssh server's host key, as the portal keeps it."""
    if not spec.ssh_host_key:
        raise ValueError("an ssh sandbox needs its host key")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(spec, SSH_HOST_KEY_SECRET),
        "type": "Opaque",
        # `data`, as the API server keeps it, so an unchanged key reads back equal (no patch)
        "data": {SSH_HOST_KEY_FILE: base64.b64encode(spec.ssh_host_key.encode()).decode()},
    }


def ssh_keys_secret(spec: WorkloadSpec) -> dict:
    """A shell sandbox's owner's public keys, one authorized_keys line each."""
    lines = "".join(f"{key}\n" for key in spec.ssh_keys)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(spec, SSH_KEYS_SECRET),
        "type": "Opaque",
        # `data`, as the API server keeps it, so unchanged keys read back equal (no patch)
        "data": {"authorized_keys": base64.b64encode(lines.encode()).decode()},
    }


def _access_parts(access_host: str) -> tuple[str, str]:
    """Split an access host that may carry a path prefix (`host/s/abc`) into host and path."""
    parts = urlsplit(f"//{access_host}")
    return parts.netloc, parts.path.rstrip("/")


def jupyter_base_url(spec: WorkloadSpec) -> str:
    """The path JupyterLab is served under: `/` for a host of its own, else the path prefix."""
    _, path = _access_parts(spec.access_host)
    return f"{path}/"


def port_name(spec: WorkloadSpec) -> str:
    """The name of the one port users reach, by image kind."""
    return {"jupyter": "jupyter", "vscode": "http"}.get(spec.image_kind, "ssh")


def sandbox_access(spec: WorkloadSpec, options: ManifestOptions | None = None) -> str:
    """How the user reaches the sandbox: a URL for a web app (JupyterLab, VS Code), an ssh
    command for a shell."""
    if spec.image_kind in ("jupyter", "vscode"):
        host, path = _access_parts(spec.access_host)
        return f"https://{host}{path}/"
    options = options or ManifestOptions()
    host, _ = _access_parts(spec.access_host)
    return f"ssh -p {SHELL_PORT} {shell_user(spec, options)}@{host}"


def shell_user(spec: WorkloadSpec, options: ManifestOptions) -> str:
    """The ssh login name: the configured one, else the owner (as the simulated driver shows)."""
    return options.shell_user or spec.owner


def container_command(spec: WorkloadSpec) -> list[str]:
    """The entrypoint by image kind. Jupyter's own token is off: the portal's access path
    authenticates users, and the NetworkPolicy admits traffic from nowhere else."""
    if spec.image_kind == "jupyter":
        return [
            "jupyter",
            "lab",
            "--ip=0.0.0.0",
            f"--port={JUPYTER_PORT}",
            "--no-browser",
            f"--ServerApp.base_url={jupyter_base_url(spec)}",
            f"--ServerApp.root_dir={HOME}",
            "--IdentityProvider.token=",
            "--ServerApp.allow_remote_access=True",
        ]
    if spec.image_kind == "vscode":
        # code-server's own password is off for the same reason; the portal's gate is in front.
        return [
            "code-server",
            f"--bind-addr=0.0.0.0:{JUPYTER_PORT}",
            "--auth=none",
            "--disable-telemetry",
            f"--user-data-dir={HOME}/.local/share/code-server",
            HOME,
        ]
    return ["/bin/sh", "-c", SHELL_SERVER_SCRIPT]


def _resources(spec: WorkloadSpec) -> dict:
    """Requests equal limits (Guaranteed QoS), GPU resource included, so the quota fits exactly.
    A slice claimed through DRA is no resource: the pod names its claim instead."""
    amounts = {"cpu": cpu_quantity(spec.cpu), "memory": gib_quantity(spec.memory_gb)}
    if not uses_dra(spec.gpu):
        amounts[spec.gpu.resource] = str(spec.gpu.count)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _placement_annotations(spec: WorkloadSpec) -> dict[str, str]:
    """What the portal placed, for operators: the device plugin picks the device itself."""
    annotations = {"gpu-portal/gpu-indices": ",".join(str(i) for i in spec.gpu.gpu_indices)}
    if spec.gpu.mig_profile:
        annotations["gpu-portal/mig-profile"] = spec.gpu.mig_profile
    if spec.gpu.mig_start is not None:
        annotations["gpu-portal/mig-start"] = str(spec.gpu.mig_start)
    return annotations


def pod_template(spec: WorkloadSpec, options: ManifestOptions | None = None) -> dict:
    """The pod: pinned to the placed node, non-root, no privilege escalation, no capabilities,
    seccomp RuntimeDefault (Pod Security `restricted`), home on the PVC, shared memory for
    data loaders."""
    options = options or ManifestOptions()
    name = port_name(spec)
    pod_spec = pinned_pod_spec(spec.gpu.node, options, fsGroupChangePolicy="OnRootMismatch")
    pod_spec.update(
        terminationGracePeriodSeconds=30,
        containers=[
            {
                "name": WORKLOAD_NAME,
                "image": spec.image,
                "imagePullPolicy": "IfNotPresent",
                "command": container_command(spec),
                "workingDir": HOME,
                "env": [
                    {"name": "HOME", "value": HOME},
                    {"name": "GPU_PORTAL_SANDBOX_ID", "value": str(spec.workload_id)},
                    # The login name the image should give uid run_as_user (nss_wrapper or similar).
                    {"name": "SANDBOX_USER", "value": shell_user(spec, options)},
                ],
                "ports": [{"name": name, "containerPort": sandbox_port(spec), "protocol": "TCP"}],
                "readinessProbe": {
                    "tcpSocket": {"port": name},
                    "periodSeconds": 5,
                    "failureThreshold": 3,
                },
                "resources": _resources(spec),
                "securityContext": container_security_context(),
                "volumeMounts": [{"name": HOME_VOLUME, "mountPath": HOME}, shm_mount()],
            }
        ],
        volumes=[shm_volume(spec.memory_gb)],
    )
    if spec.image_kind == "shell":
        pod_spec["volumes"].append({"name": SSH_KEYS_SECRET, "secret": {"secretName": SSH_KEYS_SECRET}})
        pod_spec["volumes"].append(
            {"name": SSH_HOST_KEY_SECRET, "secret": {"secretName": SSH_HOST_KEY_SECRET, "defaultMode": 0o440}}
        )
        pod_spec["containers"][0]["volumeMounts"].extend(
            [
                {"name": SSH_KEYS_SECRET, "mountPath": SSH_KEYS_MOUNT, "readOnly": True},
                {"name": SSH_HOST_KEY_SECRET, "mountPath": SSH_HOST_KEY_MOUNT, "readOnly": True},
            ]
        )
    if uses_dra(spec.gpu):
        claim_pod_spec(pod_spec, pod_spec["containers"][0], claim_name())
    add_datasets(pod_spec, spec, options)
    tolerate_gpu_taint(pod_spec, options)
    return {"metadata": {"labels": {**workload_labels(spec), **selector_labels(spec)}}, "spec": pod_spec}


def _claim_spec(size_gb: int, options: ManifestOptions) -> dict:
    claim_spec: dict = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": gib_quantity(size_gb)}},
    }
    if options.storage_class:
        claim_spec["storageClassName"] = options.storage_class
    return claim_spec


def home_claim_manifest(spec: WorkloadSpec, options: ManifestOptions | None = None) -> dict:
    """The claim `home` on the owner's persistent home: bound to its volume where one exists
    (asking for what the volume has; it is grown after binding), else provisioned new."""
    assert spec.home is not None
    options = options or ManifestOptions()
    home = spec.home
    claim_spec = _claim_spec(home.provisioned_gb if home.volume_name else home.size_gb, options)
    if home.volume_name:
        claim_spec["volumeName"] = home.volume_name
    metadata = object_meta(spec, HOME_VOLUME)
    metadata["labels"] = {**metadata.get("labels", {}), HOME_OWNER_KEY: label_value(home.owner)}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": claim_spec}


def stateful_set_manifest(spec: WorkloadSpec, options: ManifestOptions | None = None) -> dict:
    """The sandbox's one pod, with /home on the owner's persistent home (the claim `home`) or,
    without one, on a scratch claim of its own that goes with it."""
    options = options or ManifestOptions()
    metadata = object_meta(spec, WORKLOAD_NAME)
    metadata["annotations"] = _placement_annotations(spec)
    template = pod_template(spec, options)
    body: dict = {
        "replicas": 1,
        "serviceName": WORKLOAD_NAME,
        "selector": {"matchLabels": selector_labels(spec)},
        "podManagementPolicy": "OrderedReady",
        "updateStrategy": {"type": "RollingUpdate"},
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
        "template": template,
    }
    if spec.home is not None:
        template["spec"]["volumes"].append(
            {"name": HOME_VOLUME, "persistentVolumeClaim": {"claimName": HOME_VOLUME}}
        )
    else:
        body["volumeClaimTemplates"] = [
            {
                "metadata": {"name": HOME_VOLUME, "labels": selector_labels(spec)},
                "spec": _claim_spec(spec.storage_gb, options),
            }
        ]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata, "spec": body}


def service_manifest(spec: WorkloadSpec) -> dict:
    """A ClusterIP Service the access path routes to (`sandbox.<namespace>.svc`)."""
    name = port_name(spec)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(spec, WORKLOAD_NAME),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(spec),
            "ports": [{"name": name, "port": sandbox_port(spec), "targetPort": name, "protocol": "TCP"}],
        },
    }
