# The team and user cost indexes of the workload totals carry each total's days and amounts, as the
# fleet-wide one does (0010), so that a lead's workload report reads a team's largest totals from
# the index alone. The new indexes are built before the old ones go.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0014_workload_spend_day_bounds_filled"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="workloadspend",
            index=models.Index(
                fields=["team", "-cost", "workload"],
                include=("first_day", "last_day", "gpu_hours", "idle_cost"),
                name="workload_spend_team_by_cost",
            ),
        ),
        migrations.AddIndex(
            model_name="workloadspend",
            index=models.Index(
                fields=["user", "-cost", "workload"],
                include=("team", "first_day", "last_day", "gpu_hours", "idle_cost"),
                name="workload_spend_user_by_cost",
            ),
        ),
        migrations.RemoveIndex(model_name="workloadspend", name="workload_spend_team_cost"),
        migrations.RemoveIndex(model_name="workloadspend", name="workload_spend_user_cost"),
    ]
