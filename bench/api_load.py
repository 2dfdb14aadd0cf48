"""API load of one provisioning workload on the Kubernetes driver, against the fake API server.

    python bench/api_load.py

The reconciler looks at a provisioning workload every PORTAL_RECONCILE_SECONDS (3 s): one minute
is 20 passes. This runs the driver's two calls of a pass (apply the workload's objects, read its
status) 20 times for a sandbox, over HTTP with the real client, and counts the requests the API
server saw by verb and answer: the first pass (everything created), and the 19 after it (nothing
changed). No database needed.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakekube import FakeKube  # noqa: E402
from tests.workers.test_manifests import make_spec  # noqa: E402
from workers.drivers.base import ClusterConfig  # noqa: E402
from workers.drivers.kubernetes import KubernetesDriver, KubernetesOptions  # noqa: E402

PASSES = 20  # one minute at the default 3 s reconcile cadence


def _tally(requests) -> Counter:
    return Counter(f"{r.method} {r.status}" for r in requests)


def main() -> int:
    with FakeKube() as fake:
        driver = KubernetesDriver(
            ClusterConfig(name="bench", driver="kubernetes", api_url=fake.url), KubernetesOptions()
        )
        spec = make_spec()
        driver.apply_workload(spec)
        driver.workload_status(spec)
        first = list(fake.requests)
        fake.requests.clear()
        for _ in range(PASSES - 1):
            driver.apply_workload(spec)
            driver.workload_status(spec)
        steady = list(fake.requests)
    print(f"API requests of one provisioning sandbox, {PASSES} reconcile passes (one minute at 3 s)")
    print(f"  first pass:                 {len(first):>4}  {dict(sorted(_tally(first).items()))}")
    per_pass = len(steady) / (PASSES - 1)
    print(f"  each later pass (mean):     {per_pass:>6.1f}  {dict(sorted(_tally(steady).items()))}")
    print(f"  requests per minute:        {len(first) + len(steady):>4}")
    writes = sum(1 for r in steady if r.method in ("POST", "PATCH", "PUT", "DELETE"))
    print(f"  writes after the first pass: {writes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
