from django.db import migrations, models
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Cast


def of_their_team(apps, schema_editor):
    """Events about a team (its Hugging Face token, webhook, reminders, idle reclaim) and some
    about a workload (degraded, recovered, access failed, removal stuck, restarted) were recorded
    without their team, so the team's leads never saw them in the audit log: given it."""
    AuditEvent = apps.get_model("audit", "AuditEvent")
    Team = apps.get_model("accounts", "Team")
    Workload = apps.get_model("workloads", "Workload")
    teamless = AuditEvent.objects.filter(team__isnull=True)
    team_ids = {str(pk) for pk in Team.objects.values_list("pk", flat=True)}
    for object_id in set(teamless.filter(object_type="team").values_list("object_id", flat=True)):
        if object_id in team_ids:
            teamless.filter(object_type="team", object_id=object_id).update(team_id=int(object_id))
    workload_team = Workload.objects.filter(
        pk=Cast(OuterRef("object_id"), output_field=models.BigIntegerField())
    ).values("team_id")[:1]
    of_workloads = teamless.filter(object_type__in=("sandbox", "deployment"), object_id__regex=r"^[0-9]+$")
    of_workloads.update(team_id=Subquery(workload_team))


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0017_close_orphaned_approvals"),
        ("audit", "0001_initial"),
        ("accounts", "0024_token_expiry_warning"),
    ]

    operations = [migrations.RunPython(of_their_team, migrations.RunPython.noop)]
