"""Placement benchmark: speed, acceptance against first fit, and the gap to an integer optimum.

    python bench/placement.py                  # seeded synthetic workloads, prints a table
    python bench/placement.py --workload FILE  # JSON fleet and events in, one JSON line out
    python bench/placement.py --draws 200      # random workload families, both MIG modes
    python bench/placement.py --draws 200 --streams 5  # and each kind's mean over 5 streams

Every decision is checked by an independent validator (bench/checker.py); an invalid one stops
the run. See bench/README.md for what each figure means.
"""

from __future__ import annotations

import time

_PROCESS_STARTED = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.families import draw  # noqa: E402
from bench.jsonmode import BadWorkload, run_workload  # noqa: E402
from bench.optimum import compare  # noqa: E402
from bench.simulate import BestFit, FirstFit, Stats, run_stream  # noqa: E402
from bench.workloads import Mix, mixed_fleet, synthetic, views  # noqa: E402

SEED = 20240611
THROUGHPUT_ARRIVALS = 16_000  # with departures, a little over 30,000 events
QUALITY_ARRIVALS = 5_000  # per seed
QUALITY_SEEDS = 3
OPTIMUM_SNAPSHOTS = 150

WORKLOADS = (
    Mix("steady", load=0.80, slice_share=0.60),
    Mix("churn", load=1.00, slice_share=0.85, mean_hold=600.0),
    Mix("whole-heavy", load=0.95, slice_share=0.20),
    Mix("portal-rules", load=0.95, slice_share=0.89, whole_on_empty_mig=False),
)


def _speed(seed: int) -> tuple[Stats, float, Stats]:
    """One long stream through the best-fit engine on the 1,000-GPU fleet, in each MIG mode; the
    whole-process figure is taken after the first ("dynamic") stream."""
    fleet = mixed_fleet()
    gpus = views(fleet)
    mix = Mix("throughput", load=1.0, slice_share=0.7, mean_hold=1800.0)
    arrivals = synthetic(mix, fleet, THROUGHPUT_ARRIVALS, seed)
    stats = run_stream(BestFit(gpus, whole_on_empty_mig=True), gpus, arrivals, whole_on_empty_mig=True)
    process_s = time.perf_counter() - _PROCESS_STARTED
    cut_whole = views(fleet, "layouts")
    layouts = run_stream(
        BestFit(cut_whole, whole_on_empty_mig=True), cut_whole, arrivals, whole_on_empty_mig=True
    )
    print(f"Placement benchmark (seed {seed}): 1,000-GPU fleet, A100/H100/H200, half the nodes MIG")
    print()
    print("Speed, best-fit engine, one stream of arrivals and departures")
    print(f"  events                      {stats.events:>10,}")
    print(f"  decisions/s (engine only)   {stats.decisions_per_s:>10,.0f}")
    print(
        f"  p50 / p99 decision time     {stats.percentile_us(0.5):>7.0f} us / {stats.percentile_us(0.99):.0f} us"
    )
    print(f"  events/s, loop + checks     {stats.events / stats.wall_s:>10,.0f}")
    print(f"  events/s, whole process     {stats.events / process_s:>10,.0f}  (startup, fleet, stream)")
    print(
        f"  layouts mode, same stream:  {layouts.decisions_per_s:,.0f} decisions/s, p99"
        f" {layouts.percentile_us(0.99):.0f} us, {layouts.events / layouts.wall_s:,.0f} events/s loop + checks"
    )
    print()
    return stats, process_s, layouts


def _acceptance(seed: int) -> dict[str, list[float]]:
    """Each workload through best fit and first fit; returns per-seed acceptance deltas (points)."""
    print("Acceptance against first fit (every decision validated)")
    print(
        f"  {'workload':<13} {'engine':<10} {'accepted':>9} {'GPU-eq':>8} {'busy GPUs':>10}"
        f" {'density':>8} {'dec/s':>8} {'p99 us':>7}  per-seed delta, points"
    )
    fleet = mixed_fleet()
    gpus = views(fleet)
    deltas: dict[str, list[float]] = {}
    for mix in WORKLOADS:
        rows = [Stats("best-fit"), Stats("first-fit")]
        deltas[mix.name] = []
        for run_seed in range(seed + 1, seed + 1 + QUALITY_SEEDS):
            arrivals = synthetic(mix, fleet, QUALITY_ARRIVALS, run_seed)
            runs = [
                run_stream(engine(gpus, whole_on_empty_mig=mix.whole_on_empty_mig), gpus, arrivals,
                           whole_on_empty_mig=mix.whole_on_empty_mig)
                for engine in (BestFit, FirstFit)
            ]  # fmt: skip
            deltas[mix.name].append(100 * (runs[0].acceptance - runs[1].acceptance))
            for row, run in zip(rows, runs, strict=True):
                row.add(run)
        for row in rows:
            per_seed = " ".join(f"{d:+.2f}" for d in deltas[mix.name]) if row is rows[0] else ""
            print(
                f"  {mix.name:<13} {row.engine:<10} {row.acceptance:>9.2%} {row.served_share:>8.2%}"
                f" {row.mean_busy:>10.1f} {row.density:>8.3f} {row.decisions_per_s:>8,.0f}"
                f" {row.percentile_us(0.99):>7.0f}  {per_seed}"
            )
    print("  accepted: requests placed; GPU-eq: share of requested GPU-equivalents placed;")
    print("  busy GPUs: mean GPUs holding anything; density: GPU-equivalents held per busy GPU")
    print()
    return deltas


def _optimum(seed: int, mode: str = "dynamic") -> float:
    """Small snapshots against the integer program; returns the engine's gap in accepted requests."""
    report = compare(OPTIMUM_SNAPSHOTS, seed + 100, WORKLOADS[0], mode)
    gap = 1 - report.engine.accepted / report.optimum.accepted
    first_fit_gap = 1 - report.first_fit.accepted / report.optimum.accepted
    print(
        f"Gap to the integer optimum (PuLP/CBC), {mode} mode, {report.snapshots} snapshots of 2-5 MIG H100s"
        " + a slice batch"
    )
    print(f"  {'':<11} {'accepted':>9} {'GPUs used':>10} {'gap':>7}")
    print(f"  {'optimum':<11} {report.optimum.accepted:>9} {report.optimum.gpus_used:>10}")
    print(f"  {'best-fit':<11} {report.engine.accepted:>9} {report.engine.gpus_used:>10} {gap:>7.2%}")
    print(
        f"  {'first-fit':<11} {report.first_fit.accepted:>9} {report.first_fit.gpus_used:>10} {first_fit_gap:>7.2%}"
    )
    print(
        f"  worst single snapshot: {report.worst_engine_gap:.1%} fewer accepted; extra GPUs where"
        f" acceptance matched the optimum: {report.engine_gpu_gap:.2%}"
    )
    print()
    return gap


def main_synthetic(seed: int) -> int:
    """The default run: speed, acceptance against first fit, gap to the optimum, then targets."""
    stats, process_s, layouts = _speed(seed)
    deltas = _acceptance(seed)
    gap = _optimum(seed)
    layouts_gap = _optimum(seed, "layouts")
    events_per_s = stats.events / process_s
    print("Targets")
    print(f"  >= 5,000 events/s, whole process:      {events_per_s:,.0f}  {_verdict(events_per_s >= 5000)}")
    layouts_per_s = layouts.events / layouts.wall_s
    print(f"  >= 5,000 events/s, layouts loop:       {layouts_per_s:,.0f}  {_verdict(layouts_per_s >= 5000)}")
    print("  every decision valid:                  checked  PASS")
    for name, values in deltas.items():
        mean = sum(values) / len(values)
        print(f"  acceptance >= first fit, {name:<13} {mean:+.2f} points  {_verdict(mean >= 0)}")
    print(f"  within 3% of the optimum, dynamic:     {gap:.2%}  {_verdict(gap <= 0.03)}")
    print(f"  within 3% of the optimum, layouts:     {layouts_gap:.2%}  {_verdict(layouts_gap <= 0.03)}")
    print(f"Total {time.perf_counter() - _PROCESS_STARTED:.1f} s")
    return 0


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "MISS"


def main_workload(path: str) -> int:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        print(f"cannot read workload {path}: {error.strerror or error}", file=sys.stderr)
        return 2
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        print(f"{path} is not valid JSON: {error}", file=sys.stderr)
        return 2
    try:
        result = run_workload(data)
    except BadWorkload as error:
        print(f"bad workload {path}: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result, separators=(",", ":")))
    return 0


# One draw's run: (number, delta, engine, first fit, knobs, delta in GPU-equivalents placed)
DrawRun = tuple[int, float, float, float, str, float]


def _one_draw(args: tuple[int, int, str, int | None]) -> DrawRun:
    """Run draw `number` in `mode` (its stream `stream`, None for the draw's own) through both
    engines: (number, delta, engine, first fit, knobs, delta in GPU-equivalents placed)."""
    number, seed, mode, stream = args
    sample = draw(number, seed, stream=stream)
    gpus = views(sample.fleet, mode)
    runs = [
        run_stream(engine(gpus, whole_on_empty_mig=sample.whole_on_empty_mig), gpus, sample.arrivals,
                   whole_on_empty_mig=sample.whole_on_empty_mig)
        for engine in (BestFit, FirstFit)
    ]  # fmt: skip
    best, first = (100 * run.acceptance for run in runs)
    served = 100 * (runs[0].served_share - runs[1].served_share)
    return number, best - first, best, first, sample.knobs, served


def main_draws(count: int, seed: int, streams: int = 1) -> int:
    """Random workload families in both MIG modes: the mean and worst difference to first fit.

    With `streams` > 1 every draw also runs on streams - 1 more samples of its kind (same fleet
    and knobs, other requests), and the report adds each kind's mean over its streams: a draw
    behind by chance and a kind of workload the engine is behind on are told apart."""
    print(f"Acceptance against first fit over {count} random workloads per MIG mode (seed {seed})")
    print("  every decision validated; delta = engine minus first fit, in acceptance points")
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for mode in ("dynamic", "layouts"):
            jobs = [(n, seed, mode, None) for n in range(count)]
            jobs += [(n, seed, mode, k) for n in range(count) for k in range(1, streams)]
            every = list(pool.map(_one_draw, jobs, chunksize=4))
            results = every[:count]
            deltas = sorted(results, key=lambda r: r[1])
            mean = sum(r[1] for r in results) / len(results)
            behind = sum(1 for r in results if r[1] < 0)
            engine = sum(r[2] for r in results) / len(results)
            first = sum(r[3] for r in results) / len(results)
            served = sorted(r[5] for r in results)
            print(
                f"  {mode:<8} mean {mean:+.2f}  worst {deltas[0][1]:+.2f}  best {deltas[-1][1]:+.2f}"
                f"  behind on {behind} of {count}  (mean acceptance {engine:.2f} % against {first:.2f} %)"
            )
            print(
                f"           GPU-equivalents placed: mean {sum(served) / len(served):+.2f}  worst {served[0]:+.2f}"
                f"  behind on {sum(1 for d in served if d < 0)} of {count}"
            )
            for number, delta, best, first_fit_, knobs, gpu_eq in deltas[:3]:
                print(
                    f"    draw {number}: {delta:+.2f} ({best:.2f} % against {first_fit_:.2f} %;"
                    f" GPU-eq {gpu_eq:+.2f}): {knobs}"
                )
            if streams > 1:
                _kinds(pool, every, seed, mode, count, streams)
    print(f"Total {time.perf_counter() - _PROCESS_STARTED:.1f} s")
    return 0


FRESH_STREAMS = 20


def _by_kind(runs: list[DrawRun]) -> list[tuple[float, float, float, int]]:
    """(mean delta, its standard error, mean GPU-equivalents delta, draw number) per kind, worst first."""
    grouped: dict[int, list[tuple[float, float]]] = {}
    for number, delta, _best, _first, _knobs, gpu_eq in runs:
        grouped.setdefault(number, []).append((delta, gpu_eq))
    kinds = []
    for number, pairs in grouped.items():
        deltas = [d for d, _ in pairs]
        error = statistics.stdev(deltas) / len(deltas) ** 0.5
        kinds.append((statistics.fmean(deltas), error, statistics.fmean(g for _, g in pairs), number))
    return sorted(kinds)


def _kinds(
    pool: ProcessPoolExecutor,
    every: list[DrawRun],
    seed: int,
    mode: str,
    count: int,
    streams: int,
) -> None:
    """Each kind's mean over its streams, for `main_draws`. The kinds behind on that mean run
    again on FRESH_STREAMS new streams: the worst of many means is behind partly by chance, so
    only a kind whose fresh mean is behind by more than two standard errors counts as behind."""
    kinds = _by_kind(every)
    worst_stream = min(run[1] for run in every)
    suspects = [k[3] for k in kinds if k[0] < 0]
    clearly = [k for k in kinds if k[0] + 2 * k[1] < 0]
    both = [k for k in kinds if k[0] < 0 and k[2] < 0]
    print(
        f"           per kind over {streams} streams each: mean {statistics.fmean(k[0] for k in kinds):+.2f}"
        f"  worst kind {kinds[0][0]:+.2f}  worst stream {worst_stream:+.2f}"
    )
    print(
        f"           kinds behind: {len(suspects)} of {count}; by more than 2 standard errors: {len(clearly)};"
        f" behind in GPU-equivalents too: {len(both)}"
    )
    if not suspects:
        return
    jobs = [(n, seed, mode, k) for n in suspects for k in range(streams, streams + FRESH_STREAMS)]
    fresh = _by_kind(list(pool.map(_one_draw, jobs, chunksize=2)))
    confirmed = [k for k in fresh if k[0] + 2 * k[1] < 0]
    print(
        f"           on {FRESH_STREAMS} fresh streams each, confirmed behind: {len(confirmed)} of {count}"
        f" (GPU-equivalents behind too: {sum(1 for k in confirmed if k[2] < 0)})"
    )
    for mean, error, gpu_eq, number in confirmed:
        print(f"    kind {number}: {mean:+.2f} +- {error:.2f} (GPU-eq {gpu_eq:+.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", metavar="FILE", help="run a JSON workload and print one JSON line")
    parser.add_argument("--seed", type=int, default=SEED, help=f"seed of the synthetic workloads ({SEED})")
    parser.add_argument(
        "--draws", type=int, metavar="N", help="N random workloads per MIG mode against first fit"
    )
    parser.add_argument(
        "--streams",
        type=int,
        default=1,
        metavar="K",
        help="with --draws: K streams of each drawn kind, and each kind's mean over them (1)",
    )
    args = parser.parse_args(argv)
    if args.workload:
        return main_workload(args.workload)
    if args.draws:
        if args.streams < 1:
            parser.error("--streams must be at least 1")
        return main_draws(args.draws, args.seed, args.streams)
    return main_synthetic(args.seed)


if __name__ == "__main__":
    sys.exit(main())
