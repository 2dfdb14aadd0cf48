"""TGI listens on 8080, not its default 80: a non-root pod with every capability dropped (Pod
Security `restricted`) cannot bind a port below 1024."""

from django.db import migrations


def high_port(apps, schema_editor):
    Runtime = apps.get_model("catalog", "Runtime")
    Runtime.objects.filter(slug="tgi", port=80).update(port=8080)


def low_port(apps, schema_editor):
    Runtime = apps.get_model("catalog", "Runtime")
    Runtime.objects.filter(slug="tgi", port=8080).update(port=80)


class Migration(migrations.Migration):
    dependencies = [("catalog", "0001_initial")]

    operations = [migrations.RunPython(high_port, low_port)]
