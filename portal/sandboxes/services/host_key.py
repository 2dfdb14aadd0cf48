"""An ssh sandbox's server host key: made by the portal, not in the sandbox's home (which whoever
a web sandbox of its owner is shared with may read and write), so that the server cannot be
impersonated with a key lifted from there, and so that its owner can check the fingerprint their
ssh client shows on first connecting against the one on the sandbox's page."""

from __future__ import annotations

import logging

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat
from django.db import IntegrityError, transaction

from portal.accounts.ssh_keys import ssh_key_parse
from portal.sandboxes.models import SshHostKey
from portal.workloads.models import END_STATES

log = logging.getLogger(__name__)
PEM_HEAD = "-----BEGIN OPENSSH PRIVATE KEY-----"


def sandbox_ssh_host_key(*, sandbox_id: int) -> SshHostKey:
    """The sandbox's host key, made at the first ask (an ed25519 key, as ssh-keygen makes one);
    the same one after that, for as long as the sandbox lives. Two workers asking at once get
    the same key. One that no longer decrypts (SECRET_KEY rotated without a fallback) is made
    anew, the ssh server's clients warned once of a changed key, rather than handing the
    cluster ciphertext for a key and the ssh server none it can read."""
    key = SshHostKey.objects.filter(workload_id=sandbox_id).first()
    if key is not None and key.private_key.startswith(PEM_HEAD):
        return key
    if key is not None:
        log.warning("sandbox %s: its ssh host key no longer decrypts; made anew", sandbox_id)
        key.delete()
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    _, fingerprint = ssh_key_parse(public)
    try:
        with transaction.atomic():
            return SshHostKey.objects.create(
                workload_id=sandbox_id,
                private_key=private.private_bytes(
                    Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()
                ).decode(),
                public_key=public,
                fingerprint=fingerprint,
            )
    except IntegrityError:  # another worker made it meanwhile: theirs stands
        return SshHostKey.objects.get(workload_id=sandbox_id)


def sandbox_ssh_host_key_kept(*, sandbox_id: int) -> str:
    """The host key an ended sandbox had, if it is still kept (else ""): never made anew."""
    key = SshHostKey.objects.filter(workload_id=sandbox_id).first()
    return key.private_key if key is not None and key.private_key.startswith(PEM_HEAD) else ""


def sandbox_ssh_host_key_forget(*, sandbox_id: int) -> None:
    """The sandbox ended (its Secret went with its namespace): its host key is of no more use."""
    SshHostKey.objects.filter(workload_id=sandbox_id).delete()


def sandbox_ssh_host_keys_prune() -> int:
    """Forget the host keys of every ended sandbox, however it ended (a teardown given up, a
    request ended before it ran): how many."""
    deleted, _ = SshHostKey.objects.filter(workload__state__in=END_STATES).delete()
    return deleted
