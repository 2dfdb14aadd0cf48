"""SSH keys: what a person's shell sandboxes let in. Keys are checked as OpenSSH reads them (the
fingerprints here are what `ssh-keygen -l` printed for these keys), kept per person on a page and
in the API, and put into every shell sandbox of theirs as the Secret its ssh server reads."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.accounts.models import ApiToken, SshKey
from portal.accounts.services import token_create
from portal.accounts.ssh_keys import MAX_KEYS, ssh_key_add, ssh_key_parse, ssh_key_remove
from portal.audit.models import AuditEvent
from portal.core.errors import Conflict, NotFound, ValidationFailed
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILfZ1as802mKU9pp0LGJgYqFu8erGgUW9mo+a/Qrtw38 alice@laptop"
ED25519_PRINT = "SHA256:duZAon+t6iqc5jcI2RnQsUQzf/ncu4OM9+McegTo100"
RSA_3072 = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQC5GNz9cJFJkCQTBouD/VDgMQJzE5G6qG6P5YKgMPJMxSQywlhmGu/MRBDew9Ka7iR8HGPTWM2aQ/oixvlJE+dvtwXzCPeq8TKSNmB6LnCSnTLcPr1MhtPVJMjZYNMXsFHRwrjD/C12kjPtPy5zRChNBNZfZQRIRWfEb/warLogD8nw2pmHAC4g3wOmqNUcR1OY8lWm9SR+QueWuVGB4EnlLO4/ANlMfgqUWfef3jxhhKfSJ8hZlnEBWVjxQx4OjqVwMN7eY09imjQDFKPwNjm/Cgyhxqs77SQxa5ZnfaXsVrXBsIYgKManKY/p6OszSVCMfdB4F0QzbbKul9mCjnLKC9cRHg7uLCEYkMk4RYYf/Wq2d/6cW6Fm+P5brXwECkx0XqrjqPdPpqKXNEN5/hGSiVEqQr+FC3738cgeYLZAByJGSUgsCLJB/VnfI2ksfyxM3+U7NtlhdSPIAKVgGTXZ2Qs5A1U56hJdGmcgoPt297jBxhY81lMnG1rBvfTqgjU= bob@ci"
RSA_3072_PRINT = "SHA256:8QHgpGbkCJzrtGK/7X9neqzbQD3Li+Jyon8EkkR0NIQ"
RSA_1024 = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC4U07zokp2ZcCaLOcN7uAPKI27rKmMwfJArdz1w6fTZb3aPP8E++0bxQQCADEC2hMGScR1aa+RjoKzeaZNSTog0iqyuokNNa0tfU42GAPGNGuDf6d29UWSJEacYUgvLgcGiYCw1STBSpqlW9MKzmKb6c0Oh76EOq6khmyVD+h/nQ== old"
ECDSA = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBFh8CCXlIGeTlvm3uK3u5mct5M4kp6yLbI7wSJx0zmydqJoP7Nj407EIGi7CAtRJMhXSv6B5UySLb9pHgJBmUUA="
ECDSA_PRINT = "SHA256:hwRuOxdPtwZSz1CvYnI84doSH+huODbcCMr08xH3d78"


@pytest.mark.parametrize(
    ("text", "line", "fingerprint"),
    [
        (ED25519, ED25519.rsplit(" ", 1)[0], ED25519_PRINT),
        (f"  {ED25519}\n", ED25519.rsplit(" ", 1)[0], ED25519_PRINT),
        (RSA_3072, RSA_3072.rsplit(" ", 1)[0], RSA_3072_PRINT),
        (ECDSA, ECDSA.strip(), ECDSA_PRINT),
        # wrapped as a terminal wraps it: put back on one line
        ("\n".join(RSA_3072.rsplit(" ", 1)[0][i : i + 70] for i in range(0, 600, 70)), RSA_3072.rsplit(" ", 1)[0],
         RSA_3072_PRINT),
    ],
)  # fmt: skip
def test_a_key_reads_as_openssh_reads_it(text, line, fingerprint):
    assert ssh_key_parse(text) == (line, fingerprint)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "Paste one public key"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
            "That is a private key",
        ),
        (RSA_1024, "RSA keys need at least 2048 bits; this one has 1024"),
        (f"{ED25519}\n{ECDSA}", "Paste one key at a time"),
        (
            '---- BEGIN SSH2 PUBLIC KEY ----\nComment: "rsa-key"\nAAAAB3NzaC1yc2E\n---- END SSH2 PUBLIC KEY ----',
            "convert it with ssh-keygen -i -f key.pub",
        ),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP8= old", "DSA keys are refused"),
        ("ssh-foo AAAA", "Not an SSH public key of a known type"),
        ("ssh-ed25519", "The key itself is missing"),
        ("ssh-ed25519 not*base64", "its base64 does not decode"),
        (ED25519.replace("ssh-ed25519", "ssh-rsa", 1), "says it is ssh-rsa, but holds a ssh-ed25519 key"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==", "it does not load"),
        ('command="rm -rf /" ' + ED25519, "Not an SSH public key of a known type"),
    ],
)
def test_what_is_not_a_usable_public_key_is_refused_saying_why(text, says):
    with pytest.raises(ValidationFailed) as refused:
        ssh_key_parse(text)

    assert says in refused.value.message
    assert refused.value.fields == {"public_key": [refused.value.message]}


def test_a_key_is_kept_once_named_after_its_comment_and_audited(researcher):
    key = ssh_key_add(user=researcher, name="", public_key=ED25519)

    assert (key.name, key.fingerprint, key.key_type) == ("alice@laptop", ED25519_PRINT, "ssh-ed25519")
    assert key.public_key == ED25519.rsplit(" ", 1)[0]
    with pytest.raises(ValidationFailed, match="added this key already"):
        ssh_key_add(user=researcher, name="again", public_key=ED25519)
    assert ssh_key_add(user=researcher, name="", public_key=ECDSA).name == ECDSA_PRINT  # no comment
    assert AuditEvent.objects.filter(action="ssh_key.add").count() == 2


def test_someone_elses_key_cannot_be_removed_and_the_count_is_bounded(researcher, lead):
    key = ssh_key_add(user=researcher, name="laptop", public_key=ED25519)
    with pytest.raises(NotFound):
        ssh_key_remove(user=lead, key_id=key.pk)
    ssh_key_remove(user=researcher, key_id=key.pk)
    assert not SshKey.objects.exists()

    SshKey.objects.bulk_create(
        SshKey(user=researcher, name=str(i), public_key="ssh-ed25519 x", fingerprint=f"SHA256:{i}")
        for i in range(MAX_KEYS)
    )
    with pytest.raises(Conflict, match=f"You have {MAX_KEYS} SSH keys"):
        ssh_key_add(user=researcher, name="one more", public_key=ED25519)


def test_the_page_adds_lists_and_removes_keys(researcher):
    client = signed_in(researcher)
    assert "No keys yet." in client.get("/ssh-keys/").content.decode()

    added = client.post("/ssh-keys/", {"public_key": ED25519, "name": "laptop"}, HTTP_HX_REQUEST="true")
    page = added.content.decode()
    assert 'id="ssh-key-added"' in page and ED25519_PRINT in page and "<td>laptop</td>" in page

    refused = client.post("/ssh-keys/", {"public_key": RSA_1024}).content.decode()
    assert "RSA keys need at least 2048 bits" in refused
    assert SshKey.objects.count() == 1

    key = SshKey.objects.get()
    after = client.post(f"/ssh-keys/{key.pk}/remove/", HTTP_HX_REQUEST="true").content.decode()
    assert "No keys yet." in after and not SshKey.objects.exists()
    assert 'href="/ssh-keys/"' in client.get("/").content.decode()  # the user menu


def test_the_api_adds_lists_and_removes_keys(alice, researcher):
    made = alice.post("/api/v1/ssh-keys", {"public_key": RSA_3072}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert (body["name"], body["fingerprint"], body["key_type"]) == ("bob@ci", RSA_3072_PRINT, "ssh-rsa")

    listed = alice.get("/api/v1/ssh-keys").json()
    assert [key["fingerprint"] for key in listed["results"]] == [RSA_3072_PRINT]

    bad = alice.post("/api/v1/ssh-keys", {"public_key": RSA_1024}, format="json")
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"]["public_key"]

    assert alice.delete(f"/api/v1/ssh-keys/{body['id']}").status_code == 204
    assert alice.delete(f"/api/v1/ssh-keys/{body['id']}").status_code == 404

    # a key outlives the token that adds it: like a token, it takes an admin-scoped one
    _, workloads = token_create(user=researcher, name="ci", scope=ApiToken.Scope.WORKLOADS)
    scripted = Client(HTTP_AUTHORIZATION=f"Bearer {workloads}")
    planted = scripted.post("/api/v1/ssh-keys", {"public_key": ED25519}, content_type="application/json")
    assert planted.status_code == 403 and "admin scope" in planted.content.decode()
    assert scripted.get("/api/v1/ssh-keys").status_code == 200
    _, read_only = token_create(user=researcher, name="ro", scope=ApiToken.Scope.READ)
    reader = Client(HTTP_AUTHORIZATION=f"Bearer {read_only}")
    assert (
        reader.post("/api/v1/ssh-keys", {"public_key": ED25519}, content_type="application/json").status_code
        == 403
    )


def test_an_ssh_sandboxs_page_says_how_to_get_in_and_with_which_keys(fleet, researcher, team):
    from portal.workloads.models import Image
    from tests.rows import make_sandbox

    shell = Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(
        owner=researcher,
        team=team,
        gpu=gpu,
        image=shell,
        cluster=gpu.node.cluster,
        namespace="sbx-vision-shell-1",
        access="ssh -p 2222 dev@sbx-vision-shell-1.sandboxes.gpu.internal",  # a login of the cluster's
    )
    ssh_key_add(user=researcher, name="laptop", public_key=ED25519)
    client = signed_in(researcher)

    page = client.get(f"/sandboxes/{box.number}/").content.decode()

    assert "<code>ssh -p 2222 dev@sbx-vision-shell-1.sandboxes.gpu.internal</code>" in page
    assert 'id="ssh-access-note"' in page
    assert "kubectl port-forward sandbox-0 2222:2222" in page
    assert "ssh -p 2222 dev@127.0.0.1" in page
    assert "ssh lets in your 1 SSH key " in page
    panel = client.get(f"/sandboxes/{box.number}/kubectl/", HTTP_HX_REQUEST="true").content.decode()
    assert "ssh lets in your 1 SSH key " in panel and "8888" not in panel


def test_the_request_estimate_warns_of_an_ssh_image_without_a_key(researcher, fleet):
    from portal.workloads.models import Image
    from tests.sandboxes.test_views_request import SLICE

    Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    client = signed_in(researcher)
    form = {**SLICE, "image": "sshd"}

    def estimate(**changes):
        return client.get(
            "/sandboxes/estimate/", {**form, **changes}, HTTP_HX_REQUEST="true"
        ).content.decode()

    assert 'id="estimate-ssh"' in estimate(), estimate()
    assert 'id="estimate-ssh"' not in estimate(image="")  # the team's default image: a notebook
    team = researcher.memberships.get().team
    team.default_image = Image.objects.get(slug="sshd")
    team.save(update_fields=["default_image"])
    assert 'id="estimate-ssh"' in estimate(image="")  # unless the team's default is the ssh image
    ssh_key_add(user=researcher, name="laptop", public_key=ED25519)
    assert 'id="estimate-ssh"' not in estimate()


def test_an_ssh_sandbox_is_not_offered_for_sharing_and_refuses_it(fleet, researcher, lead, team):
    from portal.core.errors import Conflict
    from portal.sandboxes.services import sandbox_share
    from portal.workloads.models import Image
    from tests.rows import make_sandbox

    shell = Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    gpu = fleet["whole"].gpus.first()
    box = make_sandbox(owner=researcher, team=team, gpu=gpu, image=shell, cluster=gpu.node.cluster)

    page = signed_in(researcher).get(f"/sandboxes/{box.number}/").content.decode()
    assert "<h2>Sharing</h2>" not in page
    with pytest.raises(Conflict, match="lets in its owner's SSH keys only"):
        sandbox_share(user=researcher, sandbox_id=box.pk, usernames=["bob"])
    assert sandbox_share(user=researcher, sandbox_id=box.pk, usernames=[]).pk == box.pk  # nobody: fine


def test_ssh_sandboxes_shared_before_are_unshared_by_the_migration(fleet, researcher, lead, team):
    import importlib

    from django.apps import apps

    from portal.workloads.models import Image
    from tests.rows import make_sandbox

    unshare = importlib.import_module("portal.workloads.migrations.0013_ssh_sandboxes_unshared")
    shell = Image.objects.create(slug="sshd", name="Shell", container_image="sshd", kind=Image.Kind.SHELL)
    gpus = fleet["whole"].gpus.all()
    box = make_sandbox(owner=researcher, team=team, gpu=gpus[0], image=shell, cluster=gpus[0].node.cluster)
    web = make_sandbox(owner=researcher, team=team, gpu=gpus[1], cluster=gpus[0].node.cluster)
    box.shared_with.add(lead)
    web.shared_with.add(lead)

    unshare.unshare_ssh_sandboxes(apps, None)

    assert list(box.shared_with.all()) == [] and list(web.shared_with.all()) == [lead]
