from django.db import migrations, models

# Hub organisations whose models ask for an accepted license (and so an access token) to download.
GATED_PREFIXES = ("meta-llama/", "mistralai/", "google/gemma")


def mark_gated(apps, schema_editor):
    """Models already in the catalog from a gated organisation of the hub are marked so."""
    CatalogModel = apps.get_model("catalog", "CatalogModel")
    for model in CatalogModel.objects.all():
        if model.source.startswith(GATED_PREFIXES):
            model.gated = True
            model.save(update_fields=["gated"])


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0002_tgi_high_port"),
    ]

    operations = [
        migrations.AddField(
            model_name="catalogmodel",
            name="gated",
            field=models.BooleanField(
                default=False,
                help_text="The hub serves its checkpoint (source) only with an access token of an account "
                "that accepted its license: the team's Hugging Face token (Team settings).",
            ),
        ),
        migrations.RunPython(mark_gated, migrations.RunPython.noop),
    ]
