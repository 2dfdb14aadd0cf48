from decimal import Context, Decimal

from django.db import migrations, models

_FILL_SQL = """
INSERT INTO spend_spendrollup (span, start, level, team_id, user_id, gpu_type_id, storage, workload_id, project,
                               cost, gpu_hours, idle_cost)
SELECT span, start, 6, team_id, NULL, NULL, storage, NULL, project, SUM(cost), SUM(gpu_hours), SUM(idle_cost)
FROM spend_spendrollup WHERE level = 5
GROUP BY span, start, team_id, storage, project
"""


def fill(apps, schema_editor):
    """Every period already rolled gets its team-and-project rows, summed from its rows by team,
    user and project (the same holds, so the same exact sums): no period has to be rolled again."""
    rollup = apps.get_model("spend", "SpendRollup")
    rollup.objects.filter(level=6).delete()
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(_FILL_SQL)
        return
    exact = Context(prec=90)  # portal.spend.cost.EXACT: units are text here, added in Python
    sums: dict[tuple, list[Decimal]] = {}
    rows = rollup.objects.filter(level=5).values_list(
        "span", "start", "team_id", "storage", "project", "cost", "gpu_hours", "idle_cost"
    )
    for *key, cost, hours, idle in rows.iterator(chunk_size=2000):
        total = sums.setdefault(tuple(key), [Decimal(0)] * 3)
        for at, value in enumerate((cost, hours, idle)):
            total[at] = exact.add(total[at], Decimal(value))
    rollup.objects.bulk_create(
        [
            rollup(
                span=span,
                start=start,
                level=6,
                team_id=team,
                storage=storage,
                project=project,
                cost=cost,
                gpu_hours=hours,
                idle_cost=idle,
            )
            for (span, start, team, storage, project), (cost, hours, idle) in sums.items()
        ],
        batch_size=500,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0006_workload_day_rows_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="spendrollup",
            name="level",
            field=models.PositiveSmallIntegerField(
                choices=[
                    (1, "team"),
                    (2, "team and GPU type (or storage)"),
                    (3, "team and user"),
                    (4, "team, user, GPU type (or storage) and workload"),
                    (5, "team, user and project label (or storage)"),
                    (6, "team and project label (or storage)"),
                ]
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
