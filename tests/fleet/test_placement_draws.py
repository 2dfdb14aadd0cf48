"""The random workload families of `bench/placement.py --draws`, and their per-kind report."""

from __future__ import annotations

import subprocess
import sys

from bench.families import draw
from bench.placement import _by_kind
from tests.fleet.test_placement import ROOT


def test_a_draw_is_the_same_workload_every_time():
    assert draw(3, 11) == draw(3, 11)
    assert draw(3, 11).arrivals != draw(4, 11).arrivals


def test_another_stream_keeps_the_kind_and_changes_only_the_requests():
    own, other, third = draw(5, 11), draw(5, 11, stream=1), draw(5, 11, stream=2)
    assert draw(5, 11, stream=1) == other  # a stream is as reproducible as a draw
    for sample in (other, third):
        assert (sample.fleet, sample.knobs, sample.whole_on_empty_mig) == (
            own.fleet,
            own.knobs,
            own.whole_on_empty_mig,
        )
        assert len(sample.arrivals) == len(own.arrivals)
    assert len({tuple(a.request for a in s.arrivals) for s in (own, other, third)}) == 3


def test_kinds_are_averaged_over_their_streams_worst_first():
    runs = [
        (1, -1.0, 0, 0, "", 0.5),
        (1, -3.0, 0, 0, "", -0.5),
        (2, 2.0, 0, 0, "", 1.0),
        (2, 2.0, 0, 0, "", 3.0),
    ]
    (mean, error, gpu_eq, number), second = _by_kind(runs)
    assert (mean, error, gpu_eq, number) == (-2.0, 1.0, 0.0, 1)
    assert second == (2.0, 0.0, 2.0, 2)


def test_the_per_kind_report_runs_end_to_end_and_refuses_no_streams():
    done = subprocess.run(
        [sys.executable, "bench/placement.py", "--draws", "2", "--streams", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("per kind over 2 streams each") == 2  # one line per MIG mode
    # One of the default seed's first two kinds is behind on its mean in one mode, so it is
    # measured again on fresh streams (a change of the engine may move it; then pick a seed).
    assert done.stdout.count("fresh streams each, confirmed behind") == 1
    refused = subprocess.run(
        [sys.executable, "bench/placement.py", "--draws", "2", "--streams", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "--streams must be at least 1" in refused.stderr
