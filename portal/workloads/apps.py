from functools import partial

from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "portal.workloads"
    label = "workloads"

    def ready(self) -> None:
        """The audit log links events about sandboxes and deployments to their pages, and names
        them by their numbers; a team's leads hear of live work left by someone who leaves it."""
        from portal.audit.selectors import (
            register_object_id_resolver,
            register_object_linker,
            register_object_numberer,
        )
        from portal.workloads.models import WorkloadKind
        from portal.workloads.selectors import workload_numbers, workload_pk_of_number, workload_urls

        for kind in WorkloadKind.values:
            register_object_linker(kind, partial(workload_urls, kind))
            register_object_id_resolver(kind, partial(workload_pk_of_number, kind))
            register_object_numberer(kind, partial(workload_numbers, kind))

        # Someone leaving a team, however (the admin, single sign-on, a membership given to someone
        # else on the admin's team page), with work there still live: its leads are told.
        from django.db.models.signals import post_delete, post_save, pre_save

        from portal.accounts.models import Membership
        from portal.workloads.services import leavers

        def ended(sender, instance, **kwargs) -> None:
            leavers.membership_ended(user_id=instance.user_id, team_id=instance.team_id)

        def moving(sender, instance, raw=False, **kwargs) -> None:
            if not raw:
                leavers.membership_moving(membership=instance)

        def moved(sender, instance, raw=False, **kwargs) -> None:
            leavers.membership_moved(membership=instance)

        post_delete.connect(ended, sender=Membership, dispatch_uid="portal.workloads.leavers", weak=False)
        pre_save.connect(moving, sender=Membership, dispatch_uid="portal.workloads.movers", weak=False)
        post_save.connect(moved, sender=Membership, dispatch_uid="portal.workloads.moved", weak=False)
