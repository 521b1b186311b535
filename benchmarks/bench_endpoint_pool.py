"""Benchmark: an endpoint pool of two vLLM servers against one server.

Two OpenAI-compatible vLLM servers of the bundled tiny model run on loopback. The
same workload (one chat request per prompt with n=RUNS and the same seeds) goes
through curate's openai backend and `run_eval` (grading and Parquet shards
included) either to the first server alone (`--base-url A`) or to the pool of both
(`--base-url A --base-url B`), alternating, and the median throughputs and their
ratio are printed.

    python benchmarks/bench_endpoint_pool.py [--limit 200] [--rollouts 8] [--repeat 3]
    python benchmarks/bench_endpoint_pool.py --base-url URL_A --base-url URL_B --model NAME

Without --base-url the script starts both servers itself (start-up excluded).
The ratio stays well under 2x on a small machine: two CPU servers share the same
cores (and the client's), so a second replica adds batching slots but no compute.
On a machine with a core set (or a GPU) per replica the pool's ratio approaches the
replica count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _timing import load_workload, timed_eval

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.backends.fault_proxy (the server helper)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "sample_data" / "tiny-math"))
    parser.add_argument("--data", default=str(ROOT / "sample_data" / "arithmetic.jsonl"))
    parser.add_argument("--base-url", action="append", default=None, help="two servers to use")
    parser.add_argument("--limit", type=int, default=200, help="prompts in the workload")
    parser.add_argument(
        "--rollouts", dest="runs", type=int, default=8, help="rollouts per prompt (n)"
    )
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    prompts, refs = load_workload(args.data, limit=args.limit)
    if args.base_url:
        if len(args.base_url) != 2:
            parser.error("give --base-url twice (two servers), or not at all")
        return run(args, args.base_url, prompts, refs)
    from tests.backends.fault_proxy import VLLMServer

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        servers = [VLLMServer(args.model, log_path=Path(tmp) / f"vllm{i}.log") for i in (0, 1)]
        start = time.perf_counter()
        for server in servers:
            server.start(timeout=600)
            stack.callback(server.stop)
        print(f"two vLLM servers started in {time.perf_counter() - start:.1f} s (excluded)")
        return run(args, [s.base_url for s in servers], prompts, refs)


def run(
    args: argparse.Namespace, urls: list[str], prompts: dict[str, Any], refs: dict[str, Any]
) -> int:
    from curate.backends.base import SamplingConfig
    from curate.backends.openai_api import open_openai

    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens)
    rollouts = len(prompts) * args.runs

    def timed(base_url: str | tuple[str, ...]) -> tuple[float, list[str]]:
        with open_openai(
            args.model, seed=0, base_url=base_url, concurrency=args.concurrency
        ) as backend:
            elapsed, result = timed_eval(backend, prompts, refs, args.runs, sampling)
            lines = backend.pool.lines()
        assert result.errors == 0, result
        return elapsed, lines

    timed(urls[0])  # warm-up: both servers' first requests compile nothing twice later
    timed(tuple(urls))
    one_t: list[float] = []
    pool_t: list[float] = []
    last_lines: list[str] = []
    for _ in range(args.repeat):
        one_t.append(timed(urls[0])[0])
        elapsed, last_lines = timed(tuple(urls))
        pool_t.append(elapsed)
    one, pool = statistics.median(one_t), statistics.median(pool_t)
    ratio = statistics.median(o / p for o, p in zip(one_t, pool_t, strict=True))
    print(
        f"workload: {len(prompts)} prompts x {args.runs} rollouts = {rollouts}, "
        f"max_tokens={args.max_tokens}, concurrency {args.concurrency}, "
        f"{os.cpu_count()} CPU cores"
    )
    print(
        f"one server:       median {one:.3f} s  {rollouts / one:8.1f} rollouts/s  "
        f"runs {[round(t, 3) for t in one_t]}"
    )
    print(
        f"pool of two:      median {pool:.3f} s  {rollouts / pool:8.1f} rollouts/s  "
        f"runs {[round(t, 3) for t in pool_t]}"
    )
    for line in last_lines:
        print(f"  {line}")
    print(
        f"pool / one server throughput: {ratio:.2f}x (median of paired runs); under 2x "
        "when the replicas share the same CPU cores"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
