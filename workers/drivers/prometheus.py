"""How full a volume is, from the cluster's Prometheus: the kubelet's volume stats
(`kubelet_volume_stats_used_bytes`, scraped from every node by kube-prometheus-stack and the
like). Reading them from the kubelets directly would take `nodes/proxy`, which lets its holder
exec into any pod of the node: the portal asks Prometheus instead, or reports no figure."""

from __future__ import annotations

import json
import logging
from urllib.parse import urlencode

import urllib3

log = logging.getLogger(__name__)
GIB = 2**30  # sizes are in GiB throughout (claims ask for "<n>Gi"), use too
_http = urllib3.PoolManager(retries=False)


def volume_used_gb(prometheus_url: str, *, namespace: str, claim: str, timeout: float = 3.0) -> float | None:
    """GiB used on the volume behind `namespace/claim` as Prometheus last saw it; None where
    Prometheus is not set, cannot be reached, or has no sample (never a made-up zero)."""
    if not prometheus_url:
        return None
    query = f'max(kubelet_volume_stats_used_bytes{{namespace="{namespace}",persistentvolumeclaim="{claim}"}})'
    url = f"{prometheus_url.rstrip('/')}/api/v1/query?{urlencode({'query': query})}"
    try:
        answer = _http.request("GET", url, timeout=urllib3.Timeout(total=timeout))
        body = json.loads(answer.data or b"{}")
    except (urllib3.exceptions.HTTPError, ValueError) as error:
        log.warning("Prometheus at %s: %s", prometheus_url, error)
        return None
    if answer.status != 200 or body.get("status") != "success":
        log.warning("Prometheus at %s answered %s: %s", prometheus_url, answer.status, body.get("error", ""))
        return None
    results = (body.get("data") or {}).get("result") or []
    if not results:
        return None
    try:
        return round(float(results[0]["value"][1]) / GIB, 2)
    except (KeyError, IndexError, TypeError, ValueError):
        return None
