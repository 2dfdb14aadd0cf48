# On SQLite, 0014 rebuilt workloads_workload to add a column, which dropped the trigger that notes
# a changed expiry for the spend reports (spend migration 0011): it is made again here. PostgreSQL
# alters the table in place and keeps it.

import importlib

from django.db import migrations

hold_changes = importlib.import_module("portal.spend.migrations.0011_hold_changes")
TABLE = "workloads_workload"


def create_again(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for name, table, columns, noted in hold_changes.TRIGGERS:
        if table == TABLE:
            schema_editor.execute(
                f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {hold_changes._on(columns, table, 'IS NOT')} "  # noqa: S608 (constants)
                f"BEGIN INSERT INTO {hold_changes.CHANGE_TABLE} ({noted}) VALUES (OLD.id); END"
            )
    # an expiry moved while the trigger was missing went unnoted: every open hold is looked at once
    for statement in hold_changes.NOTE_ALL_OPEN:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0014_workload_access_problem"),
        ("spend", "0011_hold_changes"),
    ]

    operations = [migrations.RunPython(create_again, migrations.RunPython.noop)]
