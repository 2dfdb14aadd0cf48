"""Reading a sandbox's state from what the cluster reports: pure functions over API dicts.

Kubernetes spreads the story over the pod's phase, its conditions, its containers' states and
events; a researcher wants one line. These functions pick the line that explains the most.
"""

from __future__ import annotations

from workers.drivers.base import WorkloadStatus

IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
# An image that cannot be pulled however often the kubelet tries: a wrong name or tag, a private
# image without access. Anything else (a registry's rate limit, a timeout, a reset) is retried.
FINAL_PULL_REASONS = frozenset({"InvalidImageName", "ErrImageNeverPull"})
FINAL_PULL_WORDS = ("not found", "manifest unknown", "repository does not exist", "unauthorized", "denied")
# The kubelet refused the pod at admission (after a reboot, a device plugin restart, a race for a
# device): the pod is Failed, and its controller replaces it.
ADMISSION_REASONS = ("UnexpectedAdmissionError", "NodeAffinity", "OutOf", "NodeShutdown", "Terminated")
CONFIG_ERROR_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


def event_time(event: dict) -> str:
    return (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or event.get("metadata", {}).get("creationTimestamp")
        or ""
    )


def latest_warning(events: list[dict], object_name: str, reasons: frozenset[str] | None = None) -> str:
    """The newest Warning event's message about `object_name` (optionally only given reasons)."""
    warnings = [
        event
        for event in events
        if event.get("type") == "Warning"
        and event.get("involvedObject", {}).get("name") == object_name
        and (reasons is None or event.get("reason") in reasons)
    ]
    if not warnings:
        return ""
    return str(max(warnings, key=event_time).get("message") or "")


def _condition(pod: dict, condition_type: str) -> dict:
    conditions = pod.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == condition_type), {})


def _terminated_text(terminated: dict) -> str:
    reason = terminated.get("reason") or "Error"
    text = f"{reason} (exit code {terminated.get('exitCode', '?')})"
    return f"{text}: {terminated['message']}" if terminated.get("message") else text


def _container_problem(pod: dict, events: list[dict]) -> WorkloadStatus | None:
    """A container state that explains a failure on its own: image pull, bad config, OOM, crashes."""
    name = pod.get("metadata", {}).get("name", "")
    for container in pod.get("status", {}).get("containerStatuses") or []:
        state = container.get("state") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        last_terminated = (container.get("lastState") or {}).get("terminated") or {}
        reason = waiting.get("reason", "")
        if reason in IMAGE_PULL_REASONS:
            detail = _pull_failure(events, name) or waiting.get("message") or reason
            if reason in FINAL_PULL_REASONS or any(word in detail.lower() for word in FINAL_PULL_WORDS):
                return WorkloadStatus("failed", f"image pull failed: {detail}")
            tries = pull_attempts(events, name)
            return WorkloadStatus("pending", f"pulling the image, retry {tries}: {_pull_trouble(detail)}")
        if reason in CONFIG_ERROR_REASONS:
            return WorkloadStatus(
                "failed", f"the container could not start: {waiting.get('message') or reason}"
            )
        if terminated.get("reason") == "OOMKilled":
            return WorkloadStatus("pending", "OOM-killed: the sandbox used all its memory; restarting it")
        if reason == "CrashLoopBackOff":
            if last_terminated.get("reason") == "OOMKilled":
                return WorkloadStatus(
                    "failed", "OOM-killed: the sandbox keeps using more memory than it was given"
                )
            return WorkloadStatus(
                "failed", f"the sandbox keeps crashing: {_terminated_text(last_terminated)}"
            )
    return None


def _pull_events(events: list[dict], object_name: str) -> list[dict]:
    """The kubelet's "Failed to pull image ..." events about the pod: the ones that say why.
    (It also records "Error: ImagePullBackOff" and "Error: ErrImagePull" under the same reason,
    which say nothing of the cause.)"""
    return [
        event
        for event in events
        if event.get("reason") == "Failed"
        and event.get("involvedObject", {}).get("name") == object_name
        and str(event.get("message") or "").startswith("Failed to pull image")
    ]


def _pull_failure(events: list[dict], object_name: str) -> str:
    found = _pull_events(events, object_name)
    return str(max(found, key=event_time).get("message") or "") if found else ""


def pull_attempts(events: list[dict], object_name: str) -> int:
    """How often the kubelet has failed to pull for the pod so far (its pull events' counts)."""
    return max(1, sum(int(event.get("count") or 1) for event in _pull_events(events, object_name)))


def _pull_trouble(detail: str) -> str:
    """A pull failure the kubelet retries, in a few words and then the registry's own."""
    lowered = detail.lower()
    if "toomanyrequests" in lowered or "429" in lowered or "rate limit" in lowered:
        return f"registry rate limit ({detail})"
    if any(word in lowered for word in ("timeout", "timed out", "connection reset", "eof", "unavailable")):
        return f"registry unreachable ({detail})"
    return detail


def _refused_at_admission(status: dict) -> bool:
    reason = status.get("reason") or ""
    return any(reason.startswith(prefix) for prefix in ADMISSION_REASONS)


def _restart_note(pod: dict) -> str:
    for container in pod.get("status", {}).get("containerStatuses") or []:
        last_terminated = (container.get("lastState") or {}).get("terminated") or {}
        if last_terminated.get("reason") == "OOMKilled":
            return "restarted after being OOM-killed"
    return ""


def pod_status(pod: dict, events: list[dict], access: str) -> WorkloadStatus:
    """One pod's state as the portal names it, with the most telling message."""
    metadata = pod.get("metadata", {})
    status = pod.get("status", {})
    phase = status.get("phase") or "Pending"
    if metadata.get("deletionTimestamp"):
        return WorkloadStatus("pending", "the pod is being replaced")
    if phase == "Failed":
        if status.get("reason") == "Evicted":
            return WorkloadStatus(
                "pending", f"evicted: {status.get('message', '')}; the pod is being recreated"
            )
        if _refused_at_admission(status):
            refused = f"{status.get('reason')}: {status.get('message', '')}".rstrip(": ")
            return WorkloadStatus(
                "pending", f"the kubelet refused the pod ({refused}); it is being recreated"
            )
        problem = _container_problem(pod, events)
        if problem is not None and problem.phase == "failed":
            return problem
        message = status.get("message") or status.get("reason") or "the pod failed"
        return WorkloadStatus("failed", f"the sandbox stopped: {message}")
    if phase == "Succeeded":
        return WorkloadStatus("failed", "the sandbox's main process exited")
    problem = _container_problem(pod, events)
    if problem is not None:
        return problem
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False":
        detail = scheduled.get("message") or latest_warning(events, metadata.get("name", ""))
        if scheduled.get("reason") == "Unschedulable":
            return WorkloadStatus("pending", f"unschedulable: {detail}")
        return WorkloadStatus("pending", f"waiting to be scheduled: {detail}".rstrip(": "))
    if phase == "Running":
        if _condition(pod, "Ready").get("status") == "True":
            return WorkloadStatus("running", _restart_note(pod), access)
        return WorkloadStatus("pending", "starting: waiting for the sandbox to accept connections")
    warning = latest_warning(events, metadata.get("name", ""))
    return WorkloadStatus("pending", f"starting: {warning}" if warning else "starting")


def workload_status(
    *,
    namespace: dict | None,
    stateful_set: dict | None,
    pods: list[dict],
    events: list[dict],
    access: str,
) -> WorkloadStatus:
    """The sandbox's state from its namespace, StatefulSet, pods and events (None when absent)."""
    if namespace is None:
        return WorkloadStatus("absent", "the namespace does not exist")
    ns_name = namespace.get("metadata", {}).get("name", "")
    if namespace.get("metadata", {}).get("deletionTimestamp") or namespace.get("status", {}).get("phase") == (
        "Terminating"
    ):
        return WorkloadStatus("terminating", f"namespace {ns_name} is being deleted")
    if stateful_set is None:
        return WorkloadStatus("absent", f"namespace {ns_name} holds no sandbox workload")
    live = [pod for pod in pods if not pod.get("metadata", {}).get("deletionTimestamp")]
    pod = (live or pods or [None])[0]
    if pod is None:
        set_name = stateful_set.get("metadata", {}).get("name", "")
        warning = latest_warning(events, set_name)
        message = "waiting for the pod to be created"
        return WorkloadStatus("pending", f"{message}: {warning}" if warning else message)
    return pod_status(pod, events, access)


def _current_pods(pods: list[dict]) -> list[dict]:
    """Per replica, the pods that count: a Failed pod left behind by the ReplicaSet (it has made
    another) says nothing about the replica; only when no other pod exists does it speak."""
    by_replica: dict[str, list[dict]] = {}
    for pod in pods:
        replica = (pod.get("metadata", {}).get("labels") or {}).get("gpu-portal/replica", "")
        by_replica.setdefault(replica, []).append(pod)
    current = []
    for group in by_replica.values():
        alive = [pod for pod in group if (pod.get("status") or {}).get("phase") != "Failed"]
        current.extend(alive or group)
    return current


def serving_status(
    *, namespace: dict | None, pods: list[dict], events: list[dict], replicas: int, access: str
) -> WorkloadStatus:
    """A serving deployment's state: running once every replica's pod is ready; failed as soon as
    one replica cannot run; otherwise pending with the first waiting replica's reason."""
    if namespace is None:
        return WorkloadStatus("absent", "the namespace does not exist")
    if namespace.get("metadata", {}).get("deletionTimestamp"):
        return WorkloadStatus("terminating", "the namespace is being deleted")
    if not pods:
        return WorkloadStatus("pending", "waiting for the replicas' pods to be created", access)
    statuses = [pod_status(pod, events, access) for pod in _current_pods(pods)]
    ready = sum(1 for status in statuses if status.phase == "running")
    failed = next((status for status in statuses if status.phase == "failed"), None)
    if failed is not None:
        return WorkloadStatus("failed", failed.message, access, ready_replicas=ready)
    if ready >= replicas:
        return WorkloadStatus("running", "", access, ready_replicas=ready)
    waiting = next((status for status in statuses if status.phase != "running"), None)
    message = f"{ready} of {replicas} replicas ready" + (
        f"; {waiting.message}" if waiting and waiting.message else ""
    )
    return WorkloadStatus("pending", message, access, ready_replicas=ready)
