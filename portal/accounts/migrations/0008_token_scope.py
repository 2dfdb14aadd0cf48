from django.db import migrations, models

SCOPES = [
    ("read", "Read only"),
    ("workloads", "Workloads (everything but tokens)"),
    ("admin", "Admin (everything, tokens included)"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0007_team_budget_alerts"),
    ]

    operations = [
        # Tokens made before scopes could do everything their user may: they keep that.
        migrations.AddField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=SCOPES, default="admin", max_length=10),
        ),
        # New tokens default to workloads: no token management.
        migrations.AlterField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=SCOPES, default="workloads", max_length=10),
        ),
    ]
