"""The simulated cluster's object store, kept in the portal database."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.fleet.models import SimulatedObject


class DatabaseObjectStore:
    def __init__(self, cluster: str):
        self.cluster = cluster

    def upsert(self, *, kind: str, namespace: str, name: str, body: dict) -> datetime:
        with transaction.atomic():
            obj, created = SimulatedObject.objects.get_or_create(
                cluster=self.cluster,
                kind=kind,
                namespace=namespace,
                name=name,
                defaults={"body": body, "created_at": timezone.now()},
            )
            if not created and obj.body != body:
                obj.body = body
                obj.save(update_fields=["body", "updated_at"])
        return obj.created_at

    def get(self, *, kind: str, namespace: str, name: str) -> tuple[dict, datetime] | None:
        obj = SimulatedObject.objects.filter(
            cluster=self.cluster, kind=kind, namespace=namespace, name=name
        ).first()
        return (obj.body, obj.created_at) if obj else None

    def delete(self, *, kind: str, namespace: str, name: str) -> None:
        SimulatedObject.objects.filter(
            cluster=self.cluster, kind=kind, namespace=namespace, name=name
        ).delete()

    def delete_namespace(self, namespace: str) -> int:
        deleted, _ = (
            SimulatedObject.objects.filter(cluster=self.cluster)
            .filter(Q(namespace=namespace) | Q(kind="Namespace", name=namespace))
            .delete()
        )
        return deleted

    def list(self, *, kind: str) -> list[tuple[str, str, dict]]:
        return [
            (o.namespace, o.name, o.body)
            for o in SimulatedObject.objects.filter(cluster=self.cluster, kind=kind).order_by(
                "namespace", "name"
            )
        ]
