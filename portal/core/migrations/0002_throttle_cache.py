"""The database cache table API rate limits are counted in when there is no Redis (PORTAL_CACHE_URL).

Made here rather than by `manage.py createcachetable` so that every way of migrating (make run,
the migration Job, the test database) has it.
"""

from django.core.management import call_command
from django.db import migrations

TABLE = "portal_throttle_cache"


def create_table(apps, schema_editor):
    call_command("createcachetable", TABLE, database=schema_editor.connection.alias, verbosity=0)


def drop_table(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial")]

    operations = [migrations.RunPython(create_table, drop_table)]
