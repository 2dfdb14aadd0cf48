"""The estimate and the real request agree: over generated teams, policies, existing usage and
requests, what `workload_estimate` says (fits the quota, approved at once, why not) is what
`workload_request` then does (queued, waiting for a lead, or refused with `quota_exceeded`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from portal.accounts.models import Team
from portal.core.errors import QuotaExceeded, ValidationFailed
from portal.workloads.models import Approval, Workload, WorkloadKind, WorkloadState
from portal.workloads.services import GpuAsk, Lifetime, WorkloadAsk, workload_estimate, workload_request

PROFILES = ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
S = WorkloadState


@dataclass(frozen=True)
class Policy:
    quota_gpus: Decimal
    monthly_budget: Decimal
    auto_approve_max_gpus: int
    auto_approve_max_hours: Decimal
    max_lifetime_hours: Decimal


@dataclass(frozen=True)
class Ask:
    kind: str
    gpu: GpuAsk
    replicas: int
    ttl_hours: Decimal


policies = st.builds(
    Policy,
    quota_gpus=st.sampled_from(
        [Decimal(v) for v in ("0", "0.143", "0.5", "1", "2", "3.5", "8", "16", "16", "16")]
    ),
    monthly_budget=st.sampled_from([Decimal(v) for v in ("0", "5", "50", "170", "1000", "50000", "50000")]),
    auto_approve_max_gpus=st.integers(min_value=0, max_value=4),
    auto_approve_max_hours=st.sampled_from([Decimal(v) for v in ("1", "24", "48")]),
    max_lifetime_hours=st.sampled_from([Decimal(v) for v in ("24", "72", "168")]),
)
gpu_asks = st.one_of(
    st.builds(GpuAsk, type=st.just("h100-80gb"), count=st.integers(min_value=1, max_value=4)),
    st.builds(GpuAsk, type=st.just("h100-80gb"), mig_profile=st.sampled_from(PROFILES)),
)
asks = st.builds(
    Ask,
    kind=st.sampled_from([WorkloadKind.SANDBOX, WorkloadKind.DEPLOYMENT]),
    gpu=gpu_asks,
    replicas=st.integers(min_value=1, max_value=3),
    ttl_hours=st.sampled_from(
        [Decimal(v) for v in ("0.5", "1", "1", "8", "8", "24", "24.5", "72", "168", "169")]
    ),
)
# What the team already holds or waits for: (whole GPUs, MIG profile or "") per workload.
usages = st.lists(
    st.one_of(
        st.tuples(st.integers(min_value=1, max_value=3), st.just("")),
        st.tuples(st.just(1), st.sampled_from(PROFILES)),
    ),
    max_size=3,
)


def _hold(*, team: Team, owner, gpu_type, count: int, mig_profile: str, number: int) -> None:
    Workload.objects.create(
        kind=WorkloadKind.SANDBOX,
        name=f"held-{number}",
        team=team,
        owner=owner,
        image=team.default_image,
        gpu_type=gpu_type,
        gpu_count=count,
        mig_profile=mig_profile,
        state=S.PENDING_APPROVAL,
        expires_at=timezone.now() + timedelta(hours=1),
    )


@pytest.mark.django_db
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(policy=policies, usage=usages, ask=asks)
def test_the_estimate_says_what_the_request_then_does(fleet, h100, team, researcher, policy, usage, ask):
    now = timezone.now()
    replicas = ask.replicas if ask.kind == WorkloadKind.DEPLOYMENT else 1
    request = WorkloadAsk(
        kind=ask.kind,
        team="vision",
        gpu=ask.gpu,
        lifetime=Lifetime(ttl_hours=ask.ttl_hours),
        replicas=replicas,
    )
    named = replace(request, name="asked")
    with transaction.atomic():
        Team.objects.filter(pk=team.pk).update(**vars(policy))
        team.refresh_from_db()
        for number, (count, mig_profile) in enumerate(usage):
            _hold(
                team=team,
                owner=researcher,
                gpu_type=h100,
                count=count,
                mig_profile=mig_profile,
                number=number,
            )
        try:
            estimate = workload_estimate(user=researcher, ask=request, now=now)
        except ValidationFailed as refused:
            with pytest.raises(ValidationFailed) as also_refused:
                workload_request(user=researcher, ask=named, now=now)
            assert also_refused.value.fields == refused.fields
            event("refused: invalid")
            transaction.set_rollback(True)
            return

        event(f"fits={estimate.fits_quota} auto={estimate.auto_approved}")
        if not estimate.fits_quota:
            with pytest.raises(QuotaExceeded) as over:
                workload_request(user=researcher, ask=named, now=now)
            assert over.value.fields["quota_left"] == str(estimate.quota_left)
            assert over.value.fields["requested"] == str(estimate.gpu_equivalents)
        else:
            workload = workload_request(user=researcher, ask=named, now=now)
            if estimate.auto_approved:
                assert workload.state in (S.QUEUED, S.PROVISIONING)
                assert estimate.why_needed == ""
                assert not Approval.objects.filter(workload=workload).exists()
            else:
                assert workload.state == S.PENDING_APPROVAL
                assert Approval.objects.get(workload=workload).why_needed == estimate.why_needed
        transaction.set_rollback(True)
