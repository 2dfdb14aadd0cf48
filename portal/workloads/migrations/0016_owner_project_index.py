from django.db import migrations, models

INDEX = models.Index(
    condition=~models.Q(project=""), fields=["owner", "team", "project"], name="workload_owner_project"
)


def add(apps, schema_editor):
    """On PostgreSQL built without holding writes to the workloads (a large table), else plainly."""
    model = apps.get_model("workloads", "Workload")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(model, INDEX, concurrently=True)
    else:
        schema_editor.add_index(model, INDEX)


def remove(apps, schema_editor):
    schema_editor.remove_index(apps.get_model("workloads", "Workload"), INDEX)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("workloads", "0015_spend_triggers_again"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="workload", index=INDEX)],
            database_operations=[migrations.RunPython(add, remove)],
        )
    ]
