"""factory_boy factories for the portal's models."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import factory

from portal.accounts.models import Membership, Team, User
from portal.fleet.models import Cluster, Gpu, GpuType, Node, PriceBookEntry
from portal.workloads.models import Image


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests")


class ImageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Image
        django_get_or_create = ("slug",)

    slug = "jupyter"
    name = "JupyterLab"
    container_image = "quay.io/jupyter/pytorch-notebook:latest"
    kind = Image.Kind.JUPYTER


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"team{n}")
    name = factory.LazyAttribute(lambda t: t.slug.title())
    quota_gpus = Decimal(16)
    auto_approve_max_gpus = 1
    auto_approve_max_hours = Decimal(24)
    max_lifetime_hours = Decimal(168)
    monthly_budget = Decimal(50000)
    default_image = factory.SubFactory(ImageFactory)


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Membership.Role.RESEARCHER


class GpuTypeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GpuType
        django_get_or_create = ("slug",)

    slug = "h100-80gb"
    name = "NVIDIA H100 80GB"
    memory_gb = 80
    mig_capable = True


class PriceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PriceBookEntry

    gpu_type = factory.SubFactory(GpuTypeFactory)
    price_per_hour = Decimal("6.88")
    effective_from = datetime(2026, 1, 1, tzinfo=UTC)


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ("name",)

    name = "test"
    driver = "simulated"


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"node-{n}")
    gpu_type = factory.SubFactory(GpuTypeFactory)


def make_node(*, name: str, gpu_type: GpuType, gpus: int, mig: bool, cluster: Cluster | None = None) -> Node:
    """A node with `gpus` GPUs of one type, MIG-enabled or whole."""
    node = NodeFactory(name=name, gpu_type=gpu_type, cluster=cluster or ClusterFactory())
    for index in range(gpus):
        Gpu.objects.create(
            node=node, index=index, gpu_type=gpu_type, mig_enabled=mig, uuid=f"GPU-{name}-{index}"
        )
    return node
