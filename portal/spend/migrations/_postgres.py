"""What this app's migrations run on PostgreSQL only (indexes and statistics SQLite has no use for,
the embedded default holding little). Not a migration: the loader skips modules named with `_`."""


def postgres_only(statements: list[str]):
    """A RunPython function that executes `statements` in order on PostgreSQL, and nothing elsewhere."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run
