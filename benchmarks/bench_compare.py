"""Benchmark: `curate compare` on two 100,000-sample x 8-rollout runs, against `curate
report` on one of them measured in the same process (the baseline).

Two Parquet score tables are written (sample by sample, as `curate eval` stores them):
a base run with Beta(0.5, 0.5) pass rates and a tuned run with every rate raised by
0.15. Then, alternating, timed `--repeat` times each after one warm-up:

    report   curate.report.build.build_report(base)           (the JSON report's work)
    compare  curate.report.compare.build_comparison([base, tuned])  (JSON's work)
    both as whole processes (`python -m curate ... -f json`), 3 times each: the wall
    time a CI check sees

and the ratio compare / report is printed. Bar: compare within 5 s (--target).

    python benchmarks/bench_compare.py [--samples 100000] [--rollouts 8] [--repeat 5]
        [--target 5] [--no-check]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_run(path: Path, rates: np.ndarray, runs: int, rng: np.random.Generator) -> None:
    import polars as pl

    samples = len(rates)
    scores = (rng.random((samples, runs)) < rates[:, None]).astype(np.float64)
    pl.DataFrame(
        {
            "sample_id": np.repeat([f"s{i:07d}" for i in range(samples)], runs),
            "rollout_idx": np.tile(np.arange(runs, dtype=np.int32), samples),
            "score": scores.ravel(),
        }
    ).write_parquet(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--rollouts", dest="runs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", type=float, default=5.0, help="seconds for compare")
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    from curate.report.build import build_report
    from curate.report.compare import build_comparison, render_comparison_json

    rng = np.random.default_rng(0)
    rates = rng.beta(0.5, 0.5, args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        base, tuned = Path(tmp) / "base.parquet", Path(tmp) / "tuned.parquet"
        write_run(base, rates, args.runs, rng)
        write_run(tuned, np.clip(rates + 0.15, 0.0, 1.0), args.runs, rng)

        def report() -> float:
            start = time.perf_counter()
            build_report(base, suspects=False)
            return time.perf_counter() - start

        def compare() -> float:
            start = time.perf_counter()
            render_comparison_json(build_comparison([base, tuned]))
            return time.perf_counter() - start

        report(), compare()  # warm-up: imports and first reads
        report_t: list[float] = []
        compare_t: list[float] = []
        for i in range(args.repeat):
            pair = (report, compare) if i % 2 == 0 else (compare, report)
            for fn in pair:
                (report_t if fn is report else compare_t).append(fn())

        def process(*argv: str) -> float:
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "curate", *argv, "-f", "json"],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
            return time.perf_counter() - start

        report_p: list[float] = []
        compare_p: list[float] = []
        for _ in range(3):
            report_p.append(process("report", str(base)))
            compare_p.append(process("compare", str(base), str(tuned)))
        result = build_comparison([base, tuned])

    r, c = statistics.median(report_t), statistics.median(compare_t)
    sets = result.comparison.sets
    print(f"workload: 2 runs x {args.samples:,} samples x {args.runs} rollouts (0/1 scores)")
    print(f"report (one run, baseline):  {r:.3f} s  (median of {args.repeat})")
    print(f"compare (two runs):          {c:.3f} s  (median of {args.repeat})")
    print(f"ratio compare / report:      {c / r:.2f}x")
    rp, cp = statistics.median(report_p), statistics.median(compare_p)
    print(f"as whole processes (-f json, median of 3): report {rp:.3f} s, compare {cp:.3f} s")
    print(
        f"result: learned {sets['learned']:,}, forgotten {sets['forgotten']:,}, "
        f"newly learnable {sets['newly_learnable']:,}, still unreachable "
        f"{sets['still_unreachable']:,}"
    )
    if c > args.target and not args.no_check:
        print(f"FAIL: compare took {c:.2f} s > {args.target:g} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
