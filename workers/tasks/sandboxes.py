"""Sandbox jobs a person asks for on a sandbox's page or the API. Each takes ids, calls one
reconcile function, and returns."""

from __future__ import annotations

from celery import shared_task

from portal.sandboxes.services import sandbox_ssh_host_keys_prune
from workers.reconcile.homes import delete_home, homes_to_delete
from workers.reconcile.insight import observe_sandbox
from workers.reconcile.kube_access import issue_kube_access


@shared_task(name="sandboxes.observe", ignore_result=True)
def observe(workload_id: int) -> None:
    """Read a sandbox's events and log tail for its page, as someone asked."""
    observe_sandbox(workload_id)


@shared_task(name="sandboxes.kube_access", ignore_result=True)
def kube_access(access_id: int) -> None:
    """Issue the kubeconfig its owner asked for."""
    issue_kube_access(access_id)


@shared_task(name="sandboxes.home_delete", ignore_result=True)
def home_delete(home_id: int) -> None:
    """Remove a home's volume, as its owner asked."""
    delete_home(home_id)


@shared_task(name="sandboxes.home_delete_due", ignore_result=True)
def home_delete_due() -> None:
    for home_id in homes_to_delete():
        delete_home(home_id)


@shared_task(name="sandboxes.ssh_host_keys_prune", ignore_result=True)
def ssh_host_keys_prune() -> None:
    """Forget the ssh host keys of ended sandboxes, however they ended."""
    sandbox_ssh_host_keys_prune()
