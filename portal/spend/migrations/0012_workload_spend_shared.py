# A workload's totals say whether it has totals under more than one team or user, so that the
# workload report looks up only those for the workloads held at a range's edges (thousands of index
# lookups that found nothing before). The flag is set for the totals already kept, then indexed.

from django.db import migrations, models
from django.db.models import Count


def mark_shared(apps, schema_editor):
    totals = apps.get_model("spend", "WorkloadSpend")
    shared = (
        totals.objects.values("workload_id").annotate(holders=Count("id")).filter(holders__gt=1).order_by()
    )
    ids = [row["workload_id"] for row in shared]
    for at in range(0, len(ids), 500):  # SQLite allows few parameters a statement
        totals.objects.filter(workload_id__in=ids[at : at + 500]).update(shared=True)


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0011_hold_changes"),
    ]

    operations = [
        migrations.AddField(
            model_name="workloadspend",
            name="shared",
            field=models.BooleanField(default=False, db_default=False),
        ),
        migrations.RunPython(mark_shared, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="workloadspend",
            index=models.Index(
                condition=models.Q(("shared", True)), fields=["workload"], name="workload_spend_shared"
            ),
        ),
    ]
