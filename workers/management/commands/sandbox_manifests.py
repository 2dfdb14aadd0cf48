"""`manage.py sandbox_manifests ID`: print, as YAML, the objects the driver applies for a sandbox.

A dry run for reviewing what the portal will create (or `kubectl diff -f -` against a cluster):
the same builders and options the configured driver of the sandbox's cluster uses.
"""

from __future__ import annotations

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.workloads.models import LIVE_STATES, Workload
from workers.drivers.base import DriverError
from workers.reconcile.clusters import driver_for
from workers.reconcile.workloads import workload_spec


class Command(BaseCommand):
    help = "Print the Kubernetes objects of a placed sandbox as multi-document YAML."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workload_id", type=int, help="the sandbox's id")

    def handle(self, *args: object, workload_id: int, **options: object) -> None:
        sandbox = (
            Workload.objects.select_related("team", "owner", "image", "cluster", "gpu_type")
            .filter(pk=workload_id)
            .first()
        )
        if sandbox is None:
            raise CommandError(f"no sandbox has id {workload_id}")
        if sandbox.cluster is None or not sandbox.node_name:
            when = " yet" if sandbox.state in LIVE_STATES else ""
            raise CommandError(f"sandbox {workload_id} is {sandbox.state}: it has no placement{when}")
        try:
            objects = driver_for(sandbox.cluster).sandbox_manifests(workload_spec(sandbox))
        except (DriverError, ValueError) as error:
            raise CommandError(f"sandbox {workload_id}: {error}") from error
        self.stdout.write(yaml.safe_dump_all(objects, explicit_start=True, sort_keys=False), ending="")
