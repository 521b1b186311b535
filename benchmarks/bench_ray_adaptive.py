"""Benchmark: an adaptive run on a Ray pool, the pool kept across rounds vs restarted.

`curate eval --adaptive --ray ... --replicas K` draws its rollouts in rounds, one
`stream()` call to the backend each. The pool starts its replicas (K vLLM engines of
the bundled tiny model, CPU build) with the first round and keeps them until the run
ends. The baseline, measured in the same process on the same workload, is the earlier
behaviour: a fresh pool (and so K engine starts) for every round. Both runs draw the
same rollouts (same seeds: checked), so the difference is the engine starts.

Printed: rounds, pool starts, wall time of each run, the ratio, and the load average
(other processes share these cores).

    python benchmarks/bench_ray_adaptive.py [--replicas 2] [--samples 24] [--max-runs 8]
                                            [--round-size 2] [--max-tokens 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from _timing import load_workload, numeric_evaluation

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
TINY = ROOT / "sample_data" / "tiny-math"
DATA = ROOT / "sample_data" / "arithmetic.jsonl"


class RestartedPool:
    """The baseline: a backend that opens a fresh Ray pool for every `stream()` call
    (every adaptive round), as the pool did when each call built its own actors."""

    def __init__(self, options: Any) -> None:
        from curate.backends.vllm_entry import open_vllm_backend

        self.options = options
        self.pool_starts = 0
        # Opening a pool reads the model's info on the cluster; no replica starts yet.
        with open_vllm_backend(str(TINY), options) as pool:
            self._info = pool.info()

    def info(self) -> Any:
        return self._info

    def generate(self, requests: Sequence[Any], sampling: Any, mode: Any) -> list[list[Any]]:
        out: list[list[Any]] = [[] for _ in requests]
        for item in self.stream(requests, sampling, mode):
            if item is not None:
                out[item[0]] = item[1]
        return out

    def stream(self, requests: Sequence[Any], sampling: Any, mode: Any) -> Iterator[Any]:
        from curate.backends.vllm_entry import open_vllm_backend

        with open_vllm_backend(str(TINY), self.options) as pool:
            yield from pool.stream(requests, sampling, mode)  # type: ignore[attr-defined]
            self.pool_starts += pool.pool_starts  # type: ignore[attr-defined]


def adaptive_run(backend: Any, args: argparse.Namespace, name: str) -> tuple[float, int, Any]:
    """(wall seconds, rounds, stored rollouts) of one adaptive run through `backend`."""
    from curate.backends.base import SamplingConfig
    from curate.evaluation.adaptive import AdaptivePolicy, run_adaptive
    from curate.store.run_dir import RolloutStore

    prompts, refs = load_workload(str(DATA), args.samples)
    sampling = SamplingConfig(temperature=1.0, max_tokens=args.max_tokens)
    evaluation = numeric_evaluation(backend, prompts, refs, args.max_runs, sampling)
    policy = AdaptivePolicy(round_size=args.round_size, max_runs=args.max_runs)
    with tempfile.TemporaryDirectory(prefix=f"bench-ray-adaptive-{name}-") as tmp:
        store = RolloutStore(Path(tmp) / "run")
        store.create()
        start = time.perf_counter()
        result = run_adaptive(store, evaluation, policy)
        seconds = time.perf_counter() - start
        rows = store.rollouts(["sample_id", "rollout_idx", "completion", "score"])
    evaluation.grader.close()
    return seconds, result.rounds, rows.sort("sample_id", "rollout_idx")


def _load() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--samples", type=int, default=24)
    parser.add_argument("--max-runs", type=int, default=8)
    parser.add_argument("--round-size", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()

    import ray

    from curate.backends.vllm_entry import open_vllm_backend
    from curate.backends.vllm_options import VllmOptions

    print(f"{os.cpu_count()} cores, {_load()} at the start")
    options = VllmOptions.parse(
        {"kv_cache_memory_gb": 0.25, "ray": "auto", "replicas": args.replicas}
    )
    # The engines' own output stays in Ray's worker logs, off the figures.
    ray.init(
        num_cpus=2, include_dashboard=False, object_store_memory=256 << 20, log_to_driver=False
    )
    try:
        restarted = RestartedPool(options)
        base_s, base_rounds, base_rows = adaptive_run(restarted, args, "restarted")
        print(
            f"restarted pool: {base_rounds} rounds, {restarted.pool_starts} pool starts "
            f"({args.replicas} replicas each), {base_rows.height} rollouts in {base_s:.1f} s"
        )
        with open_vllm_backend(str(TINY), options) as pool:
            kept_s, kept_rounds, kept_rows = adaptive_run(pool, args, "kept")
            starts = pool.pool_starts  # type: ignore[attr-defined]
        print(
            f"kept pool:      {kept_rounds} rounds, {starts} pool start "
            f"({args.replicas} replicas), {kept_rows.height} rollouts in {kept_s:.1f} s"
        )
    finally:
        ray.shutdown()
    same = base_rows.equals(kept_rows)
    print(f"same rollouts both ways (completions, scores): {same}")
    print(
        f"kept vs restarted: {kept_s:.1f} s vs {base_s:.1f} s = {base_s / kept_s:.2f}x faster, "
        f"{base_s - kept_s:.1f} s saved over {base_rounds} rounds "
        f"({(base_s - kept_s) / max(1, base_rounds - 1):.1f} s per round after the first)"
    )
    print(f"{_load()} at the end (other processes share these cores)")
    return 0 if same and base_rounds == kept_rounds else 1


if __name__ == "__main__":
    sys.exit(main())
