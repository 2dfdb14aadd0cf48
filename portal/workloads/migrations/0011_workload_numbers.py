"""Sandboxes and deployments get a number each within their kind (sandbox 1, 2, 3 ... and
deployment 1, 2, 3 ...): existing ones in the order they were made, the counters set after them,
and the links of notifications already sent moved from the old shared ids to the numbers."""

import re

from django.db import migrations, models

# A workload page as notifications link to it: /sandboxes/<id>/ or /deployments/<id>/, perhaps deeper.
WORKLOAD_LINK = re.compile(r"^/(?P<prefix>sandboxes|deployments)/(?P<id>\d+)/(?P<rest>.*)$")
PREFIX_KIND = {"sandboxes": "sandbox", "deployments": "deployment"}


def number_workloads(Workload, WorkloadCounter) -> dict[int, int]:
    """Number each kind's workloads 1, 2, 3 ... in id order and set its counter to the last;
    returns each workload's number by id."""
    numbers: dict[int, int] = {}
    kinds = Workload.objects.order_by().values_list("kind", flat=True).distinct()
    for kind in sorted({*kinds, "sandbox", "deployment"}):
        rows = list(Workload.objects.filter(kind=kind).order_by("pk").only("pk"))
        for number, row in enumerate(rows, start=1):
            row.number = number
            numbers[row.pk] = number
        Workload.objects.bulk_update(rows, ["number"], batch_size=500)
        WorkloadCounter.objects.update_or_create(kind=kind, defaults={"last": len(rows)})
    return numbers


def relink_notifications(Notification, Workload, numbers: dict[int, int]) -> None:
    """A notification's link to a workload page, by the old id, now says its number; a link to a
    workload that no longer exists, or of another kind than its path says, is left as it was."""
    kinds = dict(Workload.objects.values_list("pk", "kind"))
    changed = []
    for note in Notification.objects.filter(link__regex=r"^/(sandboxes|deployments)/[0-9]+/").only("link"):
        match = WORKLOAD_LINK.match(note.link)
        workload_id = int(match["id"]) if match else None
        if workload_id not in numbers or kinds[workload_id] != PREFIX_KIND[match["prefix"]]:
            continue
        note.link = f"/{match['prefix']}/{numbers[workload_id]}/{match['rest']}"
        changed.append(note)
    Notification.objects.bulk_update(changed, ["link"], batch_size=500)


def forwards(apps, schema_editor) -> None:
    Workload = apps.get_model("workloads", "Workload")
    numbers = number_workloads(Workload, apps.get_model("workloads", "WorkloadCounter"))
    relink_notifications(apps.get_model("accounts", "Notification"), Workload, numbers)


def backwards(apps, schema_editor) -> None:
    """Links go back to the shared ids; the numbers go with their column."""
    Workload = apps.get_model("workloads", "Workload")
    Notification = apps.get_model("accounts", "Notification")
    by_number = {
        (kind, number): pk for pk, kind, number in Workload.objects.values_list("pk", "kind", "number")
    }
    changed = []
    for note in Notification.objects.filter(link__regex=r"^/(sandboxes|deployments)/[0-9]+/").only("link"):
        match = WORKLOAD_LINK.match(note.link)
        workload_id = by_number.get((PREFIX_KIND[match["prefix"]], int(match["id"]))) if match else None
        if workload_id is not None:
            note.link = f"/{match['prefix']}/{workload_id}/{match['rest']}"
            changed.append(note)
    Notification.objects.bulk_update(changed, ["link"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0011_notification_kinds_webhooks"),
        ("workloads", "0010_scheduled_start_and_presets"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkloadCounter",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[("sandbox", "Sandbox"), ("deployment", "Deployment")],
                        max_length=20,
                        unique=True,
                    ),
                ),
                ("last", models.PositiveIntegerField(default=0)),
            ],
        ),
        migrations.AddField(
            model_name="workload",
            name="number",
            field=models.PositiveIntegerField(
                editable=False,
                null=True,
                help_text="Its number among the workloads of its kind (sandbox 12, deployment 3).",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
