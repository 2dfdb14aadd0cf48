from django.db import migrations

from portal.spend.migrations._postgres import postgres_only

# PostgreSQL only. An open hold's span runs to infinity, so in one GiST index over every span the
# open holds widen the bounding boxes of the pages they share with closed ones: a search for the
# last hour visits every page holding an open hold. Closed holds keep a GiST index of their own
# (tight boxes); open ones, a few thousand at most, are found by their start in a partial btree.
# Built concurrently: over millions of holds the GiST index takes minutes, and the workers keep
# placing and releasing holds meanwhile. The planner keeps no statistics on a partial index's
# expression, so without statistics of their own on the spans it guesses how many holds overlap a
# stretch and prefers reading the whole table (PostgreSQL 14 or later).
FORWARD = [
    "CREATE STATISTICS IF NOT EXISTS spend_closed_span_stats ON "
    "(tstzrange(started_at, GREATEST(started_at, ended_at), '[)')) FROM fleet_allocation",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS spend_closed_allocation_span ON fleet_allocation USING gist "
    "(tstzrange(started_at, GREATEST(started_at, ended_at), '[)')) WHERE ended_at IS NOT NULL",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS spend_open_allocation_start ON fleet_allocation (started_at) "
    "WHERE ended_at IS NULL",
    "DROP INDEX CONCURRENTLY IF EXISTS spend_allocation_span",
    "ANALYZE fleet_allocation",
]
BACKWARD = [
    "CREATE INDEX IF NOT EXISTS spend_allocation_span ON fleet_allocation USING gist "
    "(tstzrange(started_at, GREATEST(started_at, COALESCE(ended_at, 'infinity'::timestamptz)), '[)'))",
    "DROP INDEX IF EXISTS spend_open_allocation_start",
    "DROP INDEX IF EXISTS spend_closed_allocation_span",
    "DROP STATISTICS IF EXISTS spend_closed_span_stats",
]


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("spend", "0004_hour_rollups"),
        ("fleet", "0015_gpu_records_truth"),
    ]

    operations = [migrations.RunPython(postgres_only(FORWARD), postgres_only(BACKWARD))]
