"""Audit rows and trails say states as people read them, not as the database stores them."""

from __future__ import annotations

from portal.workloads.templatetags.workload_states import state_label


def test_states_read_as_words():
    assert state_label("pending_approval") == "pending approval"
    assert state_label("running") == "running"
    assert state_label("") == ""


def test_the_sandbox_page_trail_reads_in_words(researcher_client, researcher, team, whole_gpus):
    from portal.audit.services import audit_record
    from tests.rows import make_sandbox

    sandbox = make_sandbox(owner=researcher, team=team, gpu=whole_gpus[0])
    audit_record(actor=researcher, action="sandbox.request", obj=sandbox, to_state="pending_approval")
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert "now pending approval" in page
    assert "· →" not in page and "→ pending_approval" not in page
