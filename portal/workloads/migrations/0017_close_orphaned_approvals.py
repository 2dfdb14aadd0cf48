from django.db import migrations
from django.utils import timezone

ENDED = ("terminated", "expired", "rejected", "failed")


def close_orphans(apps, schema_editor):
    """Approvals still pending on workloads that ended (an extension asked while the request
    waited, left when the request was rejected) can no longer be decided: cancelled, and the
    deciders' notices of them marked done, as the portal now does when a workload ends."""
    Approval = apps.get_model("workloads", "Approval")
    Notification = apps.get_model("accounts", "Notification")
    now = timezone.now()
    orphans = list(
        Approval.objects.filter(state="pending", workload__state__in=ENDED).values_list("pk", flat=True)
    )
    if not orphans:
        return
    Approval.objects.filter(pk__in=orphans).update(state="cancelled", decided_at=now)
    links = [f"/approvals/#approval-{pk}" for pk in orphans]
    Notification.objects.filter(link__in=links, read_at__isnull=True).update(read_at=now)


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0016_owner_project_index"),
        ("accounts", "0022_token_scope_kubeconfigs"),
    ]

    operations = [migrations.RunPython(close_orphans, migrations.RunPython.noop)]
