"""`manage.py cluster_reconcile [--report | --apply] [--cluster NAME]`: compare each cluster with the
database after a restore (docs/backup-restore.md).

--report (the default) changes nothing anywhere: it lists the objects the portal made on each
cluster that the database does not know (orphans) and the workloads the database holds as live
that the cluster lost. --apply makes workload ids run past every id the cluster's labels name,
repairs drift (lost workloads re-created while they have time left, or failed saying why), records
the orphans and tells admins, and removes the orphans admins confirmed whose grace has passed.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.fleet.models import Cluster
from workers.reconcile.drift import repair_drift
from workers.reconcile.orphans import reconcile_orphans, workload_ids_advance


class Command(BaseCommand):
    help = "Report (or, with --apply, repair) what a cluster holds that the database does not know, and the reverse."

    def add_arguments(self, parser: CommandParser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--report", action="store_true", help="only say what differs (the default)")
        mode.add_argument(
            "--apply", action="store_true", help="repair drift, record orphans, remove confirmed ones"
        )
        parser.add_argument("--cluster", default="", help="one cluster by name (default: every cluster)")

    def handle(self, *args: object, apply: bool, cluster: str, **options: object) -> None:
        clusters = Cluster.objects.order_by("pk")
        if cluster:
            clusters = clusters.filter(name=cluster)
            if not clusters.exists():
                raise CommandError(f"no cluster is named {cluster!r}")
        errors = 0
        for row in clusters:
            errors += self._one(row, apply=apply)
        if errors:
            raise CommandError(f"{errors} error(s); see above. Nothing was removed where listing failed.")

    def _one(self, cluster: Cluster, *, apply: bool) -> int:
        self.stdout.write(f"cluster {cluster.name} ({cluster.driver})")
        look = reconcile_orphans(cluster.pk, apply=False)
        if look is None or look.errors:
            for error in look.errors if look else ["gone"]:
                self.stderr.write(f"  error: {error}")
            return 1
        if apply and workload_ids_advance(past=look.highest_id):
            self.stdout.write(
                f"  workload ids now run past {look.highest_id}, the highest the cluster's labels name"
            )
        for orphan in look.orphans:
            self.stdout.write(f"  orphan {orphan.kind} {orphan.name}: {orphan.reason}")
        for lost in look.lost:
            self.stdout.write(f"  lost {lost}")
        if not apply:
            if not look.orphans and not look.lost:
                self.stdout.write("  in step with the database")
            return 0
        errors = 0
        drift = repair_drift(cluster.pk)
        if drift is not None:
            for name in drift.orphans_deleted:
                self.stdout.write(f"  deleted namespace {name} (its workload had ended)")
            for workload_id in drift.repaired:
                self.stdout.write(f"  re-created workload {workload_id}")
            for workload_id in drift.failed:
                self.stdout.write(f"  failed workload {workload_id}: lost from the cluster, not re-created")
            for error in drift.errors:
                self.stderr.write(f"  drift: {error}")
        done = reconcile_orphans(cluster.pk, apply=True)
        if done is not None:
            for name in done.new:
                self.stdout.write(f"  recorded orphan {name}: admins were told; removed once one confirms")
            for name in done.removed:
                self.stdout.write(f"  removed orphan {name} (confirmed, grace passed)")
            for error in done.errors:
                self.stderr.write(f"  orphans: {error}")
            errors += len(done.errors)
        return errors
