from django.db import migrations

from portal.spend.migrations._postgres import postgres_only

# PostgreSQL only. A stretch's closed holds were found through the GiST index over every closed
# hold's span: a stretch of half a day a few months back matches some 17,000 of ten million holds,
# and the search visits pages enough to take 35-50 ms. Most holds are short, so they are now found by
# their start instead: those that started at most a day before the stretch (a btree range over
# (start, end), the end tested in the index), and the few longer ones that started earlier through
# a GiST index of their own. The day must match holds.LONG_HOLD.
FORWARD = [
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS spend_closed_allocation_start ON fleet_allocation "
    "(started_at, ended_at) WHERE ended_at IS NOT NULL",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS spend_long_allocation_span ON fleet_allocation USING gist "
    "(tstzrange(started_at, GREATEST(started_at, ended_at), '[)')) "
    "WHERE ended_at IS NOT NULL AND ended_at - started_at >= INTERVAL '24 hours'",
    "ANALYZE fleet_allocation",
]
BACKWARD = [
    "DROP INDEX IF EXISTS spend_long_allocation_span",
    "DROP INDEX IF EXISTS spend_closed_allocation_start",
]


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("spend", "0008_hour_blocks"),
    ]

    operations = [migrations.RunPython(postgres_only(FORWARD), postgres_only(BACKWARD))]
