"""Benchmark: `curate eval --backend openai` against a real vLLM OpenAI-compatible server.

Three clients send the same requests (one chat request per prompt with n=RUNS and the
same per-prompt seeds, the same sampling settings) to one server on loopback:

- curate: `run_eval` with the openai backend at concurrency C, including everything
  the command does (planning, retries machinery, grading, Parquet shards);
- bare: a minimal bounded-concurrency async client (AsyncOpenAI + a semaphore of C);
- sequential: one request per rollout, one at a time (the seed reference's loop),
  timed on a subset because it is slow.

    python benchmarks/bench_eval_openai.py [--concurrency 32] [--rollouts 8] [--no-check]
    python benchmarks/bench_eval_openai.py --base-url http://127.0.0.1:8000/v1 --model NAME

Without --base-url the script starts the server itself (start-up excluded) and stops it.
Target: curate's throughput at least 0.95x the bare client's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import alternate, load_workload, medians, timed_eval, verdict

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.backends.fault_proxy (the server helper)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "sample_data" / "tiny-math"))
    parser.add_argument("--data", default=str(ROOT / "sample_data" / "arithmetic.jsonl"))
    parser.add_argument("--base-url", default=None, help="use this server instead of starting one")
    parser.add_argument("--limit", type=int, default=300, help="prompts in the workload")
    parser.add_argument(
        "--rollouts", dest="runs", type=int, default=32, help="rollouts per prompt (n)"
    )
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--sequential-limit", type=int, default=8, help="prompts timed for the sequential loop"
    )
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    prompts, refs = load_workload(args.data, limit=args.limit)

    if args.base_url:
        return run(args, args.base_url, prompts, refs)
    from tests.backends.fault_proxy import VLLMServer

    with tempfile.TemporaryDirectory() as tmp:
        server = VLLMServer(args.model, log_path=Path(tmp) / "vllm.log")
        start = time.perf_counter()
        server.start()
        print(f"vLLM server start-up (excluded): {time.perf_counter() - start:.1f} s")
        try:
            return run(args, server.base_url, prompts, refs)
        finally:
            server.stop()


def run(
    args: argparse.Namespace, base_url: str, prompts: dict[str, Any], refs: dict[str, Any]
) -> int:
    from curate.backends.base import SamplingConfig
    from curate.backends.openai_api import open_openai
    from curate.core.seeds import derive_seed

    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens)
    rollouts = len(prompts) * args.runs
    seeds = {sid: derive_seed(0, sid, 0) for sid in prompts}

    def curate() -> float:
        with open_openai(
            args.model, seed=0, base_url=base_url, concurrency=args.concurrency
        ) as backend:
            elapsed, result = timed_eval(backend, prompts, refs, args.runs, sampling)
        assert result.errors == 0, result
        return elapsed

    def bare() -> float:
        return asyncio.run(bare_client(args, base_url, prompts, seeds, sampling, rollouts))

    seq_prompts = dict(list(prompts.items())[: args.sequential_limit])
    seq_rollouts = len(seq_prompts) * args.runs

    def sequential() -> float:
        from openai import OpenAI

        client = OpenAI(api_key="EMPTY", base_url=base_url, max_retries=0)
        start = time.perf_counter()
        got = 0
        for sid, messages in seq_prompts.items():
            for rollout_idx in range(args.runs):
                resp = client.chat.completions.create(
                    model=args.model,
                    messages=messages,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    max_tokens=sampling.max_tokens,
                    seed=derive_seed(0, sid, rollout_idx),
                )
                got += len(resp.choices)
        elapsed = time.perf_counter() - start
        client.close()
        assert got == seq_rollouts
        return elapsed

    bare_t, cur_t = alternate(bare, curate, args.repeat)
    seq_t = sequential()

    b, c = medians(bare_t, cur_t)
    bare_rate, cur_rate, seq_rate = rollouts / b, rollouts / c, seq_rollouts / seq_t
    # Each pair ran back to back: the median of the pairs' ratios is robust to load
    # from other processes drifting over the run (the check uses it).
    ratio = statistics.median(bt / ct for bt, ct in zip(bare_t, cur_t, strict=True))
    print(
        f"workload: {len(prompts)} prompts x {args.runs} rollouts = {rollouts}, "
        f"max_tokens={args.max_tokens}, concurrency {args.concurrency}, server {base_url}"
    )
    print(
        f"bare async client:  median {b:.3f} s  {bare_rate:8.1f} rollouts/s  "
        f"runs {[round(t, 3) for t in bare_t]}"
    )
    print(
        f"curate run_eval:    median {c:.3f} s  {cur_rate:8.1f} rollouts/s  "
        f"runs {[round(t, 3) for t in cur_t]}"
    )
    print(
        f"sequential loop:    {seq_t:.3f} s for {seq_rollouts} rollouts  {seq_rate:8.1f} rollouts/s"
    )
    print(
        f"curate / bare throughput: {ratio:.3f}x median of paired runs, "
        f"{cur_rate / bare_rate:.3f}x of medians  (target >= {args.target:.2f}x)"
    )
    print(f"curate / sequential speed-up: {cur_rate / seq_rate:.1f}x")
    return verdict(
        ratio < args.target, args.no_check, "curate eval is below the target throughput ratio"
    )


async def bare_client(
    args: argparse.Namespace,
    base_url: str,
    prompts: dict[str, Any],
    seeds: dict[str, int],
    sampling: Any,
    rollouts: int,
) -> float:
    """The minimal client: every request at once behind a semaphore of C."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0, timeout=120)
    gate = asyncio.Semaphore(args.concurrency)

    async def one(sid: str, messages: Any) -> int:
        async with gate:
            resp = await client.chat.completions.create(
                model=args.model,
                messages=messages,
                n=args.runs,
                seed=seeds[sid],
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
            )
            return len(resp.choices)

    start = time.perf_counter()
    counts = await asyncio.gather(*(one(sid, m) for sid, m in prompts.items()))
    elapsed = time.perf_counter() - start
    await client.close()
    assert sum(counts) == rollouts
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
