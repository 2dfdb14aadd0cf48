"""Every workload has its number now (0011): required, and unique within its kind. A migration of
its own, so that PostgreSQL alters the table after the numbers are written and committed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0011_workload_numbers"),
    ]

    operations = [
        migrations.AlterField(
            model_name="workload",
            name="number",
            field=models.PositiveIntegerField(
                editable=False,
                help_text="Its number among the workloads of its kind (sandbox 12, deployment 3).",
            ),
        ),
        migrations.AddConstraint(
            model_name="workload",
            constraint=models.UniqueConstraint(
                fields=("kind", "number"), name="workload_number_unique_per_kind"
            ),
        ),
    ]
