"""Sandbox API views: parse, call one service or selector, return."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.authentication import full_scope
from portal.core.api import IDEMPOTENCY_KEY
from portal.core.errors import NotFound
from portal.core.lists import PagedListView
from portal.core.serializers import validated
from portal.fleet.selectors import storage_price
from portal.sandboxes.models import SshHostKey
from portal.sandboxes.selectors import (
    kube_access_status,
    sandbox_insight_for,
    sandbox_kube_access_for,
    sandboxes_shared_with,
)
from portal.sandboxes.serializers import (
    EstimateSerializer,
    HomeDeleteSerializer,
    HomeResizeSerializer,
    HomeSerializer,
    InsightSerializer,
    KubeconfigSerializer,
    SandboxRequestSerializer,
    SandboxSerializer,
    SharedSandboxSerializer,
    SharingSerializer,
)
from portal.sandboxes.services import (
    home_delete,
    home_of,
    home_resize,
    sandbox_estimate,
    sandbox_insight_request,
    sandbox_kube_access_request,
    sandbox_request,
    sandbox_request_body,
    sandbox_restart,
    sandbox_share,
)
from portal.workloads.api import (
    ByNumber,
    WorkloadApi,
    WorkloadCostView,
    WorkloadDetailView,
    WorkloadExtendView,
    WorkloadExtensionWithdrawView,
    WorkloadHistoryView,
    WorkloadListView,
    WorkloadTerminateView,
    WorkloadUtilizationView,
    WorkloadWithdrawView,
)
from portal.workloads.models import Workload, WorkloadKind
from portal.workloads.selectors import workloads_visible_to, workloads_with_details
from portal.workloads.serializers import ExtendSerializer
from portal.workloads.services import sandbox_keep

NOT_A_REQUEST = OpenApiResponse(description="It is not a request waiting to start.")
NO_EXTENSION = OpenApiResponse(description="No extension waits for a lead.")
ENDED = OpenApiResponse(description="The sandbox has ended.")


class _Sandbox:
    kind = WorkloadKind.SANDBOX
    serializer_class = SandboxSerializer


class SandboxListView(_Sandbox, WorkloadListView):
    """Sandboxes you may see (researcher: own; lead: the team's; admin: all), newest first."""

    def get_queryset(self) -> QuerySet[Workload]:
        sandboxes = workloads_visible_to(self.request.user, kind=WorkloadKind.SANDBOX)
        # the host keys' public halves: their private ones are not decrypted for a list
        keys = Prefetch("ssh_host_key", queryset=SshHostKey.objects.defer("private_key"))
        return workloads_with_details(sandboxes).prefetch_related(keys)

    @extend_schema(
        request=SandboxRequestSerializer,
        responses={201: SandboxSerializer},
        parameters=[IDEMPOTENCY_KEY],
        description="Request a sandbox: approved and placed at once within the team's policy, "
        "otherwise `pending_approval` until a lead decides.",
    )
    def post(self, request: Request) -> Response:
        def create() -> Workload:
            fields = SandboxRequestSerializer(data=request.data).service_kwargs()
            return sandbox_request(user=request.user, **fields)

        return self.created(request, scope="sandboxes.create", create=create)


class SandboxEstimateView(generics.GenericAPIView):
    """What a request would cost and whether it would be approved and placed at once."""

    serializer_class = EstimateSerializer

    @extend_schema(request=SandboxRequestSerializer, responses={200: EstimateSerializer})
    def post(self, request: Request) -> Response:
        fields = SandboxRequestSerializer(data=request.data).service_kwargs()
        estimate = sandbox_estimate(user=request.user, **fields)
        return Response(EstimateSerializer(estimate).data)


class SandboxRequestBodyView(ByNumber, generics.GenericAPIView):
    """Request again: this sandbox's settings (any state) as a body `POST /api/v1/sandboxes`
    accepts, named `<name>-2`; change what you like and post it."""

    kind = WorkloadKind.SANDBOX
    serializer_class = SandboxRequestSerializer

    @extend_schema(responses={200: SandboxRequestSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return Response(sandbox_request_body(user=request.user, sandbox_id=pk))


class SandboxDetailView(_Sandbox, WorkloadDetailView):
    """One sandbox (404 when it is not one you may see)."""


@extend_schema_view(
    post=extend_schema(request=ExtendSerializer, responses={200: SandboxSerializer, 409: ENDED})
)
class SandboxExtendView(_Sandbox, WorkloadExtendView):
    """Move the expiry by `hours`: at once within policy, otherwise through a lead's approval
    (the sandbox's `approval` is then the pending extension)."""


@extend_schema_view(post=extend_schema(request=None, responses={200: SandboxSerializer, 409: ENDED}))
class SandboxTerminateView(_Sandbox, WorkloadTerminateView):
    """End a sandbox now; billing stops at once."""


@extend_schema_view(post=extend_schema(request=None, responses={200: SandboxSerializer, 409: NOT_A_REQUEST}))
class SandboxWithdrawView(_Sandbox, WorkloadWithdrawView):
    """Withdraw a request that waits for approval or in the queue: it ends at once (as
    `terminated`); nothing was billed, its quota is free again and its approval is closed.
    409 once it is placed (terminate it instead) or ended."""


@extend_schema_view(post=extend_schema(request=None, responses={200: SandboxSerializer, 409: NO_EXTENSION}))
class SandboxExtensionWithdrawView(_Sandbox, WorkloadExtensionWithdrawView):
    """Withdraw the extension that waits for a lead; its approval is closed, the expiry stays."""


class SandboxSharingView(_Sandbox, WorkloadApi):
    """Who besides its owner may open a sandbox (team members only; the owner alone sets it)."""

    @extend_schema(request=SharingSerializer, responses={200: SandboxSerializer})
    def put(self, request: Request, pk: int) -> Response:
        users = validated(SharingSerializer(data=request.data))["users"]
        sandbox_share(user=request.user, sandbox_id=pk, usernames=users, may_add=full_scope(request))
        return self.shown(request, pk)


@extend_schema_view(post=extend_schema(request=None, responses={200: SandboxSerializer, 409: ENDED}))
class SandboxRestartView(_Sandbox, WorkloadApi):
    """A new pod for a running sandbox on the same placement; its home volume is kept."""

    def post(self, request: Request, pk: int) -> Response:
        sandbox_restart(user=request.user, sandbox_id=pk)
        return self.shown(request, pk)


class SandboxInsightView(ByNumber, generics.GenericAPIView):
    """The sandbox's recent events and the end of its pod's log, as a worker last read them.
    POST asks for a fresh read (202); GET again until `pending` is false."""

    kind = WorkloadKind.SANDBOX
    serializer_class = InsightSerializer

    def _answer(self, request: Request, pk: int, status: int) -> Response:
        _, insight = sandbox_insight_for(user=request.user, sandbox_id=pk)
        empty = {
            "requested_at": None,
            "read_at": None,
            "pending": False,
            "events": [],
            "log_tail": "",
            "error": "",
        }
        data = InsightSerializer(insight).data if insight is not None else empty
        return Response(data, status=status)

    @extend_schema(responses={200: InsightSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return self._answer(request, pk, 200)

    @extend_schema(request=None, responses={202: InsightSerializer, 409: ENDED})
    def post(self, request: Request, pk: int) -> Response:
        sandbox_insight_request(user=request.user, sandbox_id=pk)
        return self._answer(request, pk, 202)


class SandboxKubeconfigView(ByNumber, generics.GenericAPIView):
    """kubectl access for the sandbox's owner: POST asks for a kubeconfig (202), GET returns it
    once `state` is `ready`. It opens the sandbox's namespace only (its pod, log, events, exec,
    port-forward) and stops working when the sandbox ends."""

    kind = WorkloadKind.SANDBOX
    serializer_class = KubeconfigSerializer

    def _answer(self, request: Request, pk: int, status: int) -> Response:
        sandbox, access = sandbox_kube_access_for(user=request.user, sandbox_id=pk)
        data = kube_access_status(access, sandbox)
        return Response(KubeconfigSerializer(data).data, status=status, headers={"Cache-Control": "no-store"})

    @extend_schema(responses={200: KubeconfigSerializer})
    def get(self, request: Request, pk: int) -> Response:
        return self._answer(request, pk, 200)

    @extend_schema(request=None, responses={202: KubeconfigSerializer, 409: ENDED})
    def post(self, request: Request, pk: int) -> Response:
        sandbox_kube_access_request(user=request.user, sandbox_id=pk)
        return self._answer(request, pk, 202)


class SharedSandboxListView(PagedListView):
    """Running sandboxes their owners share with you, newest first: each with where to open it
    (its page and actions stay its owner's)."""

    serializer_class = SharedSandboxSerializer
    queryset = Workload.objects.none()  # for the schema

    def get_queryset(self) -> QuerySet[Workload]:
        return sandboxes_shared_with(self.request.user)


class HomeView(generics.GenericAPIView):
    """Your persistent home volume: 404 until your first sandbox makes it. PATCH grows it within
    your team's policy; DELETE (with your username as `confirm`) deletes it and everything in it."""

    serializer_class = HomeSerializer

    def _shown(self, request: Request) -> Response:
        home = home_of(user=request.user)
        if home is None:
            raise NotFound("You have no home yet: your first sandbox makes it.")
        return Response(self._serialized(home))

    def _serialized(self, home: Any) -> dict[str, Any]:
        return HomeSerializer(home, context={"price_per_gb_month": storage_price()}).data

    def get(self, request: Request) -> Response:
        return self._shown(request)

    @extend_schema(request=HomeResizeSerializer, responses={200: HomeSerializer})
    def patch(self, request: Request) -> Response:
        home_resize(user=request.user, size_gb=validated(HomeResizeSerializer(data=request.data))["size_gb"])
        return self._shown(request)

    @extend_schema(request=HomeDeleteSerializer, responses={200: HomeSerializer})
    def delete(self, request: Request) -> Response:
        confirm = validated(HomeDeleteSerializer(data=request.data))["confirm"]
        return Response(self._serialized(home_delete(user=request.user, confirm=confirm)))


class SandboxCostView(_Sandbox, WorkloadCostView):
    """What the sandbox has cost, per hour (`step=3600`) or day (`step=86400`) of its life."""


class SandboxUtilizationView(_Sandbox, WorkloadUtilizationView):
    """GPU utilization and memory of the devices the sandbox held, per minute or hour, as the
    node agents reported them (`from`, `to`: ISO times, the last day by default; `step`: 60 or 3600)."""


@extend_schema_view(post=extend_schema(request=None, responses={200: SandboxSerializer, 409: ENDED}))
class SandboxKeepView(_Sandbox, WorkloadApi):
    """Keep a sandbox warned for idleness: the warning goes and the idle clock starts again."""

    def post(self, request: Request, pk: int) -> Response:
        sandbox_keep(user=request.user, sandbox_id=pk)
        return self.shown(request, pk)


class SandboxHistoryView(_Sandbox, WorkloadHistoryView):
    pass
