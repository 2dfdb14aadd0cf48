"""An ssh sandbox lets in its owner's SSH keys only and is no longer shared: take back the shares
made before, so that teammates are not shown a sandbox they cannot open."""

from django.db import migrations


def unshare_ssh_sandboxes(apps, schema_editor):
    Workload = apps.get_model("workloads", "Workload")
    for workload in Workload.objects.filter(image__kind="shell", shared_with__isnull=False).distinct():
        workload.shared_with.clear()


class Migration(migrations.Migration):
    dependencies = [("workloads", "0012_workload_number_required")]

    operations = [migrations.RunPython(unshare_ssh_sandboxes, migrations.RunPython.noop)]
