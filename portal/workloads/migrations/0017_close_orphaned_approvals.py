from django.db import migrations
from django.utils import timezone

ENDED = ("terminated", "expired", "rejected", "failed")


def close_orphans(apps, schema_editor):
    """Approvals still pending on workloads that ended (an extension asked while the request
    waited, left when the request was rejected) can no longer be decided: cancelled, and the
    deciders' notices of every approval no longer pending marked done, as the portal now does
    when a workload ends."""
    Approval = apps.get_model("workloads", "Approval")
    Notification = apps.get_model("accounts", "Notification")
    now = timezone.now()
    orphans = Approval.objects.filter(state="pending", workload__state__in=ENDED)
    orphans.update(state="cancelled", decided_at=now)
    # and every decider's notice of an approval no longer pending (those the portal cancelled
    # before it marked their notices done too)
    unread = Notification.objects.filter(link__startswith="/approvals/#approval-", read_at__isnull=True)
    waiting = {
        f"/approvals/#approval-{pk}"
        for pk in Approval.objects.filter(state="pending").values_list("pk", flat=True)
    }
    done = [pk for pk, link in unread.values_list("pk", "link") if link not in waiting]
    Notification.objects.filter(pk__in=done).update(read_at=now)


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0016_owner_project_index"),
        ("accounts", "0022_token_scope_kubeconfigs"),
    ]

    operations = [migrations.RunPython(close_orphans, migrations.RunPython.noop)]
