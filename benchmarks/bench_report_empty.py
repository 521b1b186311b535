"""Benchmark: what the empty-answer count adds to `curate report` on a run directory.

The count reads the text of short completions (at most SHORT_TOKENS tokens): on a data
set of short answers that is every completion, the worst case. This builds such a run
(SAMPLES x RUNS rollouts of 1-4 character answers, a tenth of them empty, written in
shards as `curate eval` writes them), then times `build_report` with the count and
with it switched off, alternating, in one process.

    python benchmarks/bench_report_empty.py [--samples 100000] [--rollouts 8] [--repeat 5]

No issue sets a target: the figure is printed for the record, and --target (3x by
default, a regression guard) fails the run when the count costs more. Measured on a
shared 2-core machine: +0.12 s on 400,000 rollouts (about 2.5x of a 0.08 s report).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import verdict


def write_run(path: Path, samples: int, runs: int) -> None:
    import polars as pl

    from curate.store.run_dir import RolloutStore

    rng = random.Random(0)
    store = RolloutStore(path)
    store.create()
    store.write_manifest({"model": "m", "backend": "fake", "runs": runs, "mode": "chat"})
    n = samples * runs
    texts = [("" if rng.random() < 0.1 else str(rng.randint(0, 9999))) for _ in range(n)]
    frame = pl.DataFrame(
        {
            "sample_id": [f"s{i // runs:07d}" for i in range(n)],
            "rollout_idx": [i % runs for i in range(n)],
            "score": [float(rng.random() < 0.5) for _ in range(n)],
            "completion": texts,
            "extracted": texts,
            "completion_tokens": [max(1, len(t) // 2) for t in texts],
        },
        schema_overrides={"rollout_idx": pl.Int32, "completion_tokens": pl.Int32},
    )
    step = 512 * runs  # one shard per default chunk
    for start in range(0, n, step):
        store.append(frame.slice(start, step))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--rollouts", dest="runs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", type=float, default=3.0)
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    import curate.analysis.empty as empty
    from curate.report.build import build_report

    counted = empty.load_empty
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_run(run, args.samples, args.runs)

        def timed(with_count: bool) -> float:
            empty.load_empty = counted if with_count else (lambda path: None)  # type: ignore[assignment]
            start = time.perf_counter()
            report = build_report(run, suspects=False)
            elapsed = time.perf_counter() - start
            assert ("empty_completions" in report.summary.extra) is with_count
            return elapsed

        timed(True), timed(False)  # warm-up
        on: list[float] = []
        off: list[float] = []
        for i in range(args.repeat):
            for flag in (i % 2 == 0, i % 2 != 0):
                (on if flag else off).append(timed(flag))
    a, b = statistics.median(on), statistics.median(off)
    rollouts = args.samples * args.runs
    print(f"run: {rollouts:,} rollouts of short answers (every text is read)")
    print(f"report without the empty-answer count: median {b:.3f} s  runs {off}")
    print(f"report with it:                         median {a:.3f} s  runs {on}")
    print(f"ratio with/without: {a / b:.2f}x  (target <= {args.target:.2f}x)")
    return verdict(a / b > args.target, args.no_check, "the empty-answer count costs too much")


if __name__ == "__main__":
    sys.exit(main())
