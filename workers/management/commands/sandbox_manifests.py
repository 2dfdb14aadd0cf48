"""`manage.py sandbox_manifests N`: print, as YAML, the objects the driver applies for sandbox N
(`--deployment N`: for deployment N), numbered as the pages and the API number them.

A dry run for reviewing what the portal will create (or `kubectl diff -f -` against a cluster):
the same builders and options the configured driver of the workload's cluster uses.
"""

from __future__ import annotations

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.workloads.models import LIVE_STATES, Workload, WorkloadKind
from workers.drivers.base import DriverError
from workers.manifests.serving import redacted
from workers.reconcile.clusters import driver_for
from workers.reconcile.workloads import workload_spec


class Command(BaseCommand):
    help = "Print the Kubernetes objects of a placed sandbox or deployment as multi-document YAML."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "number", type=int, help="the sandbox's number, as its page shows it (sandbox 12: 12)"
        )
        parser.add_argument("--deployment", action="store_true", help="the number is a deployment's")

    def handle(self, *args: object, number: int, deployment: bool, **options: object) -> None:
        kind = WorkloadKind.DEPLOYMENT if deployment else WorkloadKind.SANDBOX
        workload = (
            Workload.objects.select_related("team", "owner", "image", "cluster", "gpu_type")
            .filter(kind=kind, number=number)
            .first()
        )
        if workload is None:
            raise CommandError(f"no {kind} {number}")
        if workload.cluster is None or not workload.node_name:
            when = " yet" if workload.state in LIVE_STATES else ""
            raise CommandError(f"{kind} {number} is {workload.state}: it has no placement{when}")
        try:
            objects = driver_for(workload.cluster).workload_manifests(workload_spec(workload))
        except (DriverError, ValueError) as error:
            raise CommandError(f"{kind} {number}: {error}") from error
        self.stdout.write(
            yaml.safe_dump_all(redacted(objects), explicit_start=True, sort_keys=False), ending=""
        )
