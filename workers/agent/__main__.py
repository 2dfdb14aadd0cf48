"""Run the node agent.

    python -m workers.agent --once                 # read this node's GPUs once and print the reading
    python -m workers.agent --portal URL           # every --interval seconds: read, then report
                                                   # (token from GPU_PORTAL_AGENT_TOKEN)

`--once` needs no portal: it is the check to run on a GPU machine. Where the kubelet's
PodResources socket is there (`--pod-resources`, mounted from the node in the DaemonSet), every
device says which pod holds it; where it is not, `pods_error` says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import socket
import sys
import time

from workers.agent.podresources import SOCKET, PodDevices, list_pod_devices
from workers.agent.reading import XidWatch, read_node
from workers.agent.report import ReadingBuffer, Reporter

log = logging.getLogger("workers.agent")


def main(argv: list[str] | None = None, *, nvml=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="read once, print JSON, exit")
    parser.add_argument(
        "--portal", default=os.environ.get("GPU_PORTAL_URL", ""), help="the portal's base URL"
    )
    parser.add_argument("--node", default=os.environ.get("NODE_NAME", socket.gethostname()))
    parser.add_argument(
        "--interval", type=float, default=float(os.environ.get("GPU_PORTAL_AGENT_INTERVAL", "5"))
    )
    parser.add_argument("--iterations", type=int, default=0, help="stop after this many readings (0: never)")
    parser.add_argument(
        "--pod-resources",
        default=os.environ.get("GPU_PORTAL_POD_RESOURCES", SOCKET),
        help="the kubelet's PodResources socket ('' to skip the device -> pod mapping)",
    )
    args = parser.parse_args(argv)
    if nvml is None:
        import pynvml as nvml  # nvidia-ml-py

    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        print(json.dumps({"node": args.node, "error": f"NVML: {error}"}))
        return 1
    try:
        if args.once:
            reading = read_node(nvml, args.node, pods=_pods(args.pod_resources))
            print(json.dumps(dataclasses.asdict(reading), indent=2))
            return 0
        token = os.environ.get("GPU_PORTAL_AGENT_TOKEN", "")
        if not args.portal or not token:
            print(
                "--portal (or GPU_PORTAL_URL) and GPU_PORTAL_AGENT_TOKEN are needed to report",
                file=sys.stderr,
            )
            return 2
        buffer, reporter, xids = ReadingBuffer(), Reporter(args.portal, token), XidWatch(nvml)
        done = 0
        while not args.iterations or done < args.iterations:
            started = time.monotonic()
            buffer.add(read_node(nvml, args.node, xids=xids, pods=_pods(args.pod_resources)))
            reporter.flush(buffer)
            done += 1
            if not args.iterations or done < args.iterations:
                time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        return 0
    finally:
        nvml.nvmlShutdown()


def _pods(socket_path: str) -> PodDevices | None:
    if not socket_path:
        return None
    if not os.path.exists(socket_path):
        return PodDevices(error=f"PodResources: no socket at {socket_path}")
    return list_pod_devices(socket_path)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    raise SystemExit(main())
