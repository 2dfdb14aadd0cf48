# Holds whose billed end may have moved are noted by the database as they are written (an end set
# or changed, a deletion, a workload's expiry changed), so that a report checks those few open holds
# against what was rolled instead of every open hold. Triggers on both databases; the open holds
# remembered so far are noted once.
#
# On SQLite, Django rebuilds a table to alter it, which drops its triggers: a later migration that
# alters fleet_allocation, fleet_storagehold or workloads_workload there must create them again
# (tests/spend/test_hold_changes.py fails until it does).

from django.db import migrations, models

CHANGE_TABLE = "spend_spendholdchange"
# (trigger, table, the columns whose change is noted (none: a deletion), the column the old row's
# id is noted in): one row a change
TRIGGERS = [
    ("spend_allocation_end_changed", "fleet_allocation", ("ended_at", "workload_id"), "allocation_id"),
    ("spend_allocation_deleted", "fleet_allocation", (), "allocation_id"),
    ("spend_storage_end_changed", "fleet_storagehold", ("ended_at",), "storage_hold_id"),
    ("spend_storage_deleted", "fleet_storagehold", (), "storage_hold_id"),
    ("spend_expiry_changed", "workloads_workload", ("expires_at",), "workload_id"),
]


def _on(columns: tuple[str, ...], table: str, differ: str) -> str:
    """The trigger's event, table and row condition: a deletion, or an update that changed a value
    of `columns` (one naming the column but keeping its value is not noted). `differ`: the
    database's "not equal, NULLs compared as values"."""
    if not columns:
        return f"DELETE ON {table} FOR EACH ROW"
    changed = " OR ".join(f"OLD.{column} {differ} NEW.{column}" for column in columns)
    return f"UPDATE OF {', '.join(columns)} ON {table} FOR EACH ROW WHEN ({changed})"


def _postgresql() -> list[str]:
    sql = []
    for name, table, columns, noted in TRIGGERS:
        sql.append(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "  # noqa: S608 (constants)
            f"INSERT INTO {CHANGE_TABLE} ({noted}) VALUES (OLD.id); RETURN NULL; END $$"
        )
        sql.append(
            f"CREATE TRIGGER {name} AFTER {_on(columns, table, 'IS DISTINCT FROM')} EXECUTE FUNCTION {name}()"
        )
    return sql


def _sqlite() -> list[str]:
    return [
        f"CREATE TRIGGER {name} AFTER {_on(columns, table, 'IS NOT')} "  # noqa: S608 (constants)
        f"BEGIN INSERT INTO {CHANGE_TABLE} ({noted}) VALUES (OLD.id); END"
        for name, table, columns, noted in TRIGGERS
    ]


# Changes made before the triggers were there (since the workers last looked) went unnoted: every
# remembered open hold is noted once, so the next check looks at each, as it did before.
NOTE_ALL_OPEN = [
    f"INSERT INTO {CHANGE_TABLE} ({column}) SELECT {column} FROM spend_spendopenhold WHERE {column} IS NOT NULL"  # noqa: S608 (constants)
    for column in ("allocation_id", "storage_hold_id")
]


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in {"postgresql": _postgresql, "sqlite": _sqlite}[vendor]() + NOTE_ALL_OPEN:
        schema_editor.execute(statement)


def drop_triggers(apps, schema_editor):
    postgresql = schema_editor.connection.vendor == "postgresql"
    for name, table, _, _ in TRIGGERS:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if postgresql else ""))
        if postgresql:
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {name}()")


class Migration(migrations.Migration):
    dependencies = [
        ("spend", "0010_workload_spend_by_cost"),
        ("fleet", "0018_admin_names"),
        ("workloads", "0012_workload_number_required"),
    ]

    operations = [
        migrations.CreateModel(
            name="SpendHoldChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("allocation_id", models.BigIntegerField(null=True)),
                ("storage_hold_id", models.BigIntegerField(null=True)),
                ("workload_id", models.BigIntegerField(null=True)),
            ],
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
