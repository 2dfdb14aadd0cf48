"""Admins start node discovery from the fleet page and see unrecognised GPU nodes flagged."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.audit.models import AuditEvent
from portal.fleet.models import Node
from tests.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admin_starts_discovery_on_kubernetes_clusters(monkeypatch, admin_user, fleet):
    cluster = ClusterFactory(name="prod", driver="kubernetes", api_url="http://127.0.0.1:1")
    sent = []
    monkeypatch.setattr("portal.core.jobs.transaction.on_commit", lambda send: sent.append(send))
    response = client_for(admin_user).post("/fleet/discover/", follow=True)
    assert response.status_code == 200
    assert "Node discovery started on prod" in response.content.decode()
    assert len(sent) == 1
    assert AuditEvent.objects.filter(action="cluster.discovery_requested", object_id=str(cluster.pk)).exists()


def test_researchers_cannot_start_discovery(researcher, fleet):
    response = client_for(researcher).post("/fleet/discover/", follow=True)
    assert "Only platform admins may start node discovery." in response.content.decode()
    assert not AuditEvent.objects.filter(action="cluster.discovery_requested").exists()


def test_fleet_page_flags_nodes_with_unknown_products(admin_user, fleet):
    cluster = ClusterFactory(name="prod", driver="kubernetes")
    Node.objects.create(cluster=cluster, name="gpu-b200-a", product="NVIDIA-B200", unknown_product=True)
    page = client_for(admin_user).get("/fleet/").content.decode()
    assert "gpu-b200-a: NVIDIA-B200" in page
    assert "Discover GPU nodes now" in page
