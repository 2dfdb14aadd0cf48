# Roll-up amounts move from dollars with 18 places (which could not keep a 1/7 or 1/9 GPU share
# exactly) to exact units (portal.spend.cost). Roll-ups are derived: the rows in the old scale are
# dropped, reports cost those days live meanwhile, and the workers' periodic roll-up rolls them
# again (or `manage.py spend_rollup` at once).

from decimal import Decimal

from django.db import migrations

import portal.spend.models

TEAM_END_INDEX = (  # a team's holds open or ended lately (the minutes since today's roll-up)
    "CREATE INDEX IF NOT EXISTS spend_allocation_team_end ON fleet_allocation (team_id, ended_at)",
    "DROP INDEX IF EXISTS spend_allocation_team_end",
)


def drop_rollups(apps, schema_editor):
    for name in ("SpendRollup", "WorkloadSpend", "SpendPeriod"):
        apps.get_model("spend", name).objects.all().delete()


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TEAM_END_INDEX[0])


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TEAM_END_INDEX[1])


def units_field():
    return portal.spend.models.UnitsField(default=Decimal("0"))


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0001_rollups"),
    ]

    operations = [
        migrations.RunPython(drop_rollups, migrations.RunPython.noop),
        *[
            migrations.AlterField(model_name=model, name=name, field=units_field())
            for model in ("spendrollup", "workloadspend")
            for name in ("cost", "gpu_hours", "idle_cost")
        ],
        migrations.RunPython(create_index, drop_index),
    ]
