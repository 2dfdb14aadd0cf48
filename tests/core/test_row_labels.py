"""A report row names its key beside its label only when the label does not already say it:
"Persistent storage (homes)", not "Persistent storage (homes) storage"."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.template.loader import render_to_string
from django.utils import timezone

from portal.core.text import says


def test_a_label_says_its_key_only_word_for_word():
    assert says("Persistent storage (homes)", "storage")
    assert says("(no project)", "(no project)")
    assert not says("Alice Researcher", "alice")  # the username is worth showing
    assert not says("NVIDIA H100 80GB", "h100-80gb")
    assert not says("sandbox train", "sandbox-3")


def test_the_statement_table_names_storage_once():
    rows = [
        {"key": "h100-80gb", "label": "NVIDIA H100 80GB", "gpu_hours": 1, "cost": 6.88, "idle_cost": 0},
        {
            "key": "storage",
            "label": "Persistent storage (homes)",
            "gpu_hours": 0,
            "cost": 0.55,
            "idle_cost": 0,
            "storage_only": True,
        },
    ]
    html = render_to_string("spend/partials/statement_table.html", {"rows": rows, "heading": "GPU type"})
    assert "Persistent storage (homes)</td>" in html
    assert '<span class="sub">storage</span>' not in html
    assert 'NVIDIA H100 80GB <span class="sub">h100-80gb</span>' in html
    no_gpu_hours = '<span class="muted" title="Storage holds no GPU">\N{EN DASH}</span>'  # not 0.00
    assert f'<td class="num">{no_gpu_hours}</td>' in html


def test_the_spend_page_names_storage_once(admin_client, team, researcher, h100):
    from portal.fleet.models import StorageHold

    now = timezone.now()
    StorageHold.objects.create(
        user=researcher, team=team, what="home of alice", size_gb=50, price_per_gb_month=Decimal("0.10"),
        started_at=now - timedelta(hours=5), ended_at=now - timedelta(hours=1),
    )  # fmt: skip
    page = admin_client.get("/spend/", {"group_by": "gpu_type"}).content.decode()
    assert "Persistent storage (homes)" in page
    assert '<span class="sub">storage</span>' not in page
    assert (
        'data-label="GPU-hours"><span class="muted" title="Storage holds no GPU">\N{EN DASH}</span>' in page
    )
