# The workload report's cost index carries each total's days and amounts, so that PostgreSQL reads
# the largest totals from the index alone. The new index is built before the old one goes.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0009_closed_holds_by_start"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="workloadspend",
            index=models.Index(
                fields=["-cost", "workload"],
                include=("first_day", "last_day", "gpu_hours", "idle_cost"),
                name="workload_spend_by_cost",
            ),
        ),
        migrations.RemoveIndex(model_name="workloadspend", name="workload_spend_cost"),
    ]
