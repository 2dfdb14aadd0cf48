from django.db import migrations

from portal.spend.migrations._postgres import postgres_only

# PostgreSQL only. The workload report finds the workloads running across an edge of a range's whole
# days through the GiST index over every total's days (workload_spend_days), whose pages for one day
# hold mostly totals of a single day: some 1,300 pages visited for 1,900 totals across a day of 90
# days ago. Only a total of two days or more can run across an edge, and those are few (160,000 of
# 4.3 million): they get a GiST index of their own, some 25 times smaller.
FORWARD = [
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS workload_spend_across ON spend_workloadspend USING gist "
    "(daterange(first_day, last_day, '[]')) WHERE last_day > first_day",
    "ANALYZE spend_workloadspend",
]
BACKWARD = ["DROP INDEX IF EXISTS workload_spend_across"]


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("spend", "0015_workload_spend_lead_indexes_covering"),
    ]

    operations = [migrations.RunPython(postgres_only(FORWARD), postgres_only(BACKWARD))]
