"""Lengths of time in words: minutes under an hour, hours and minutes beyond, never "0.03 h"."""

from __future__ import annotations

from decimal import Decimal

from django.urls import reverse

from portal.core.text import hours_words, seconds_words
from portal.workloads.models import WorkloadState
from portal.workloads.queue_wait import QueueWait
from tests.rows import make_sandbox


def test_lifetimes_under_an_hour_read_in_minutes():
    assert hours_words(Decimal("0.034")) == "2 minutes"
    assert hours_words(Decimal("0.50")) == "30 minutes"
    assert hours_words(Decimal("0.0001")) == "1 minute"  # never "0 minutes" for a lifetime
    assert hours_words(1) == "1 h"
    assert hours_words(Decimal("1.5")) == "1 h 30 min"
    assert hours_words(48) == "48 h"


def test_waits_read_in_hours_and_minutes_from_an_hour_on():
    assert seconds_words(6960) == "1 h 56 min"
    assert QueueWait(seconds=6960, start_at=None).label == "about 1 h 56 min"
    assert QueueWait(seconds=7200, start_at=None).label == "about 2 h"
    assert QueueWait(seconds=40 * 60, start_at=None).label == "about 40 minutes"
    assert QueueWait(seconds=30, start_at=None).label == "under a minute"


def test_the_estimate_says_a_short_lifetime_in_minutes(researcher_client, fleet):
    page = researcher_client.get(
        reverse("sandbox-estimate"),
        {
            "team": "vision",
            "gpu_mode": "whole",
            "gpu_type": "h100-80gb",
            "count": 1,
            "ttl_hours": "0.034",
            "lifetime_mode": "hours",
        },
        HTTP_HX_REQUEST="true",  # the form's htmx refresh
    ).content.decode()
    assert "runs 2 minutes from when it starts" in page
    assert "0.03 h" not in page


def test_a_waiting_sandbox_says_its_half_hour_lifetime_in_minutes(researcher_client, researcher, team, h100):
    sandbox = make_sandbox(
        owner=researcher,
        team=team,
        gpu_type=h100,
        state=WorkloadState.QUEUED,
        expires_at=None,
        ttl_hours=Decimal("0.5"),
    )
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert '30 minutes<div class="sub">from when it starts running' in page
    assert "0.50 h" not in page
    listed = researcher_client.get("/").content.decode()
    assert "30 minutes once started" in listed
    sandbox.state = WorkloadState.PROVISIONING
    sandbox.save(update_fields=["state"])
    page = researcher_client.get(f"/sandboxes/{sandbox.number}/").content.decode()
    assert "30 minutes after it starts running" in page


def test_a_sentence_keeps_its_words_as_written():
    from portal.core.text import sentence

    assert sentence("reclaimed: its GPUs were idle") == "Reclaimed: its GPUs were idle"  # not "gpus"
    assert sentence("") == ""
