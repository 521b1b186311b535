"""What the report's length section costs on a run directory, in one run.

    .venv/bin/python benchmarks/bench_lengths.py [--samples 200000] [--rollouts 8] [--repeat 3]

1. Writes a run directory once (cached): SAMPLES x RUNS rollouts in shards as `curate eval`
   writes them, with scores, completion token counts (log-normal, cut at max_tokens 1024)
   and the `truncated` flag of those that hit the limit.
2. Times `build_report(run)` in this process with the length section (the real report) and
   without it (the same call with the section's read switched off: the report as it was
   before the section), alternating, REPEAT times each, and prints the medians and their ratio.

`benchmarks/bench_report.py` measures the report on a bare score table, where the section
costs a schema read only (there are no token counts to read).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

MAX_TOKENS = 1024
SHARD_ROWS = 1 << 16


def make_run(root: Path, samples: int, runs: int, seed: int) -> Path:
    import numpy as np
    import polars as pl

    from curate.store.run_dir import RolloutStore

    run = root / f"lengths-{samples}x{runs}-seed{seed}"
    if (run / "manifest.json").is_file():
        return run
    rng = np.random.default_rng(seed)
    store = RolloutStore(run)
    store.create()
    store.write_manifest({"model": "bench", "sampling": {"max_tokens": MAX_TOKENS}})
    total = samples * runs
    rate = np.repeat(rng.beta(0.4, 0.6, size=samples), runs)
    tokens = np.minimum(rng.lognormal(5.5, 0.7, size=total).astype(np.int64) + 1, MAX_TOKENS)
    cut = tokens >= MAX_TOKENS
    score = np.where(cut, 0.0, (rng.random(total) < rate).astype(np.float64))
    ids = np.repeat(np.array([f"s{i:08d}" for i in range(samples)]), runs)
    frame = pl.DataFrame(
        {
            "sample_id": ids,
            "rollout_idx": np.tile(np.arange(runs, dtype=np.int32), samples),
            "score": score,
            "truncated": cut,
            "completion_tokens": tokens.astype(np.int32),
            "prompt_tokens": np.full(total, 40, dtype=np.int32),
        }
    )
    for start in range(0, total, SHARD_ROWS):
        store.append(frame.slice(start, SHARD_ROWS))
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--rollouts", dest="runs", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()

    from curate.analysis import lengths as lengths_module
    from curate.report.build import build_report

    root = Path(args.cache_dir or Path(tempfile.gettempdir()) / "curate-bench")
    root.mkdir(parents=True, exist_ok=True)
    run = make_run(root, args.samples, args.runs, args.seed)
    real = lengths_module.load_lengths

    def timed(with_section: bool) -> float:
        # build_report imports load_lengths when called: switching the module's attribute
        # switches the section.
        lengths_module.load_lengths = real if with_section else (lambda *a, **k: None)
        try:
            start = time.perf_counter()
            report = build_report(run, suspects=False)
            seconds = time.perf_counter() - start
        finally:
            lengths_module.load_lengths = real
        assert ("lengths" in report.summary.extra) == with_section
        return seconds

    timed(True)  # warm the file cache and the imports
    with_s, without = [], []
    for _ in range(args.repeat):
        without.append(timed(False))
        with_s.append(timed(True))
    a, b = statistics.median(without), statistics.median(with_s)
    section = build_report(run, suspects=False).summary.extra["lengths"]
    print(f"run directory: {args.samples:,} samples x {args.runs} rollouts ({run})")
    print(f"report without the length section: median {a:.3f} s ({args.repeat} runs)")
    print(f"report with the length section:    median {b:.3f} s ({args.repeat} runs)")
    print(f"ratio: {b / a:.2f}x (+{b - a:.3f} s)")
    print(
        f"truncated {section['truncation_rate']:.1%}, recommended max_tokens "
        f"{section['recommended_max_tokens']} (cuts {section['recommended_cut_share']:.1%})"
    )


if __name__ == "__main__":
    main()
