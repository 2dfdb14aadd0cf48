"""SSH public keys: what a person logs in to their shell sandboxes with.

A key is checked as OpenSSH writes it (`<type> <base64> [comment]`): the type inside the key must
be the one named, the key material must load (RSA of at least 2048 bits; DSA, which OpenSSH has
dropped, is refused), and its fingerprint is OpenSSH's (`SHA256:` and the unpadded base64 of the
key's SHA-256). Options in front of a key (`command=...`) are refused: the portal writes each key
as a plain line of the sandbox's authorized keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from portal.accounts.models import SshKey, User
from portal.audit.services import audit_record
from portal.core.errors import Conflict, NotFound, ValidationFailed

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",  # security keys (FIDO): checked by shape only
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
MIN_RSA_BITS = 2048
MAX_KEYS = 20
MAX_KEY_CHARS = 8000  # a 16384-bit RSA key is about 2,800


def _refused(message: str) -> ValidationFailed:
    return ValidationFailed(message, fields={"public_key": [message]})


_BASE64_LINE = re.compile(r"^[A-Za-z0-9+/=]+$")


def _unwrapped(text: str) -> str:
    """One key broken over lines as a terminal wraps it (its type on the first line, only base64
    on the others) put back on one line; anything else as it is."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) > 1 and len(lines[0].split()) >= 2 and all(_BASE64_LINE.match(line) for line in lines[1:]):
        return "".join(lines)
    return text


def ssh_key_parse(text: str) -> tuple[str, str]:
    """The key as one authorized_keys line (type and base64, the comment dropped) and its
    fingerprint; ValidationFailed saying what is wrong."""
    if "BEGIN SSH2 PUBLIC KEY" in text:
        raise _refused(
            "That is a key in the SSH2 (RFC 4716) format PuTTY saves: convert it with "
            "ssh-keygen -i -f key.pub and paste the one line it prints."
        )
    text = _unwrapped(text)
    words = text.strip().split()
    if not words or len(text) > MAX_KEY_CHARS:
        raise _refused("Paste one public key, as in ~/.ssh/id_ed25519.pub: ssh-ed25519 AAAA... you@host.")
    if len([line for line in text.strip().splitlines() if line.strip()]) > 1 and "PRIVATE" not in text:
        raise _refused("Paste one key at a time: this holds several lines.")
    if words[0].startswith("-----BEGIN") or "PRIVATE" in text:
        raise _refused(
            "That is a private key: paste the public one (the .pub file), and keep this one to yourself."
        )
    kind = words[0]
    if kind not in KEY_TYPES:
        if kind == "ssh-dss":
            raise _refused("DSA keys are refused (OpenSSH no longer accepts them): make an ed25519 key.")
        raise _refused(
            f"Not an SSH public key of a known type ({', '.join(KEY_TYPES[:5])}, or a security key)."
        )
    if len(words) < 2:
        raise _refused("The key itself is missing after its type.")
    try:
        blob = base64.b64decode(words[1], validate=True)
        (length,) = struct.unpack(">I", blob[:4])
        inner = blob[4 : 4 + length].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError):
        raise _refused("The key is damaged: its base64 does not decode.") from None
    if inner != kind:
        raise _refused(f"The key says it is {kind}, but holds a {inner or 'damaged'} key.")
    line = f"{kind} {words[1]}"
    if not kind.startswith("sk-"):
        try:
            key = load_ssh_public_key(line.encode())
        except (ValueError, UnsupportedAlgorithm):
            raise _refused("The key is damaged: it does not load.") from None
        if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
            raise _refused(f"RSA keys need at least {MIN_RSA_BITS} bits; this one has {key.key_size}.")
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return line, f"SHA256:{digest}"


def ssh_keys_of(user: User) -> QuerySet[SshKey]:
    return SshKey.objects.filter(user=user)


@transaction.atomic
def ssh_key_add(*, user: User, name: str, public_key: str) -> SshKey:
    """Add a public key of `user`'s; named after its comment when no name is given."""
    line, fingerprint = ssh_key_parse(public_key)
    words = public_key.split()
    name = (name.strip() or " ".join(words[2:]) or fingerprint)[:100]
    User.objects.select_for_update().filter(pk=user.pk).first()  # one add at a time per person
    if SshKey.objects.filter(user=user).count() >= MAX_KEYS:
        raise Conflict(f"You have {MAX_KEYS} SSH keys, the most one may hold: remove one first.")
    try:
        with transaction.atomic():
            key = SshKey.objects.create(user=user, name=name, public_key=line, fingerprint=fingerprint)
    except IntegrityError:
        raise _refused(f"You have added this key already ({fingerprint}).") from None
    audit_record(actor=user, action="ssh_key.add", obj=key, detail=f"{key.name} {fingerprint}")
    return key


def ssh_key_remove(*, user: User, key_id: int) -> SshKey:
    """Remove one of `user`'s keys: their running shell sandboxes stop taking it shortly."""
    key = SshKey.objects.filter(pk=key_id, user=user).first()
    if key is None:
        raise NotFound("No such SSH key.")
    audit_record(actor=user, action="ssh_key.remove", obj=key, detail=f"{key.name} {key.fingerprint}")
    key.delete()
    return key
