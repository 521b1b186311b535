"""Benchmark: `curate eval` through the vLLM backend against a bare `LLM.chat` call.

Both sides share one engine (start-up excluded on both), the same prompts and the
same sampling settings (SamplingParams(n=N) per prompt, the same per-prompt seeds).
The curate side includes everything the command does after start-up: planning,
generation, grading, and writing every rollout to Parquet shards.

curate streams from the engine (each request stored as it finishes, so Ctrl-C keeps
what is done). A third arm times the batch path it replaced (one `LLM.chat` call per
chunk of prompts, stored chunk by chunk) on the same engine, so the streaming
path's cost or gain is measured in the same run.

    python benchmarks/bench_eval_vllm.py [--rollouts 16] [--repeat 3] [--no-check]

Targets: curate's wall time at most 1.05x the bare call, and streaming at most 1.05x
the batch path.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _timing import alternate, load_workload, medians, timed_eval, verdict

if TYPE_CHECKING:
    from curate.backends.base import Backend

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "sample_data" / "tiny-math"))
    parser.add_argument("--data", default=str(ROOT / "sample_data" / "arithmetic.jsonl"))
    parser.add_argument("--rollouts", dest="runs", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chunk-size", type=int, default=None)
    parser.add_argument("--target", type=float, default=1.05)
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    from curate.backends.base import SamplingConfig
    from curate.backends.vllm_local import open_vllm, sampling_params
    from curate.core.seeds import derive_seed
    from curate.evaluation.spec import DEFAULT_CHUNK_SIZE

    prompts, refs = load_workload(args.data)
    ids = list(prompts)
    prompts_list = list(prompts.values())
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens)
    seed = 0
    chunk = args.chunk_size or DEFAULT_CHUNK_SIZE
    rollouts = len(ids) * args.runs

    t0 = time.perf_counter()
    with open_vllm(args.model, seed=seed) as backend:
        startup = time.perf_counter() - t0
        llm = backend._llm  # the same engine for the bare baseline
        params = [sampling_params(sampling, args.runs, derive_seed(seed, sid, 0)) for sid in ids]

        def bare() -> float:
            start = time.perf_counter()
            outs = llm.chat(prompts_list, sampling_params=params, use_tqdm=False)
            assert sum(len(o.outputs) for o in outs) == rollouts
            return time.perf_counter() - start

        def curate() -> float:
            return timed_eval(
                backend, prompts, refs, args.runs, sampling, seed=seed, chunk_size=chunk
            )[0]

        batch_backend = BatchOnly(backend)

        def batch() -> float:
            return timed_eval(
                batch_backend, prompts, refs, args.runs, sampling, seed=seed, chunk_size=chunk
            )[0]

        bare_t, cur_t = alternate(bare, curate, args.repeat)
        batch_t, stream_t = alternate(batch, curate, args.repeat)

    b, c = medians(bare_t, cur_t)
    ratio = c / b
    bb, ss = medians(batch_t, stream_t)
    stream_ratio = ss / bb
    print(f"engine start-up (excluded): {startup:.1f} s")
    print(
        f"workload: {len(ids)} prompts x {args.runs} rollouts = {rollouts}, "
        f"max_tokens={args.max_tokens}, chunk size {chunk}"
    )
    print(f"bare LLM.chat:      median {b:.3f} s  ({rollouts / b:,.0f} rollouts/s)  runs {bare_t}")
    print(f"curate run_eval:    median {c:.3f} s  ({rollouts / c:,.0f} rollouts/s)  runs {cur_t}")
    print(f"ratio curate/bare:  {ratio:.3f}x  (target <= {args.target:.2f}x)")
    print(f"batch path:         median {bb:.3f} s  runs {batch_t}")
    print(f"streaming path:     median {ss:.3f} s  runs {stream_t}")
    print(f"ratio stream/batch: {stream_ratio:.3f}x  (target <= {args.target:.2f}x)")
    return verdict(
        ratio > args.target or stream_ratio > args.target,
        args.no_check,
        "curate eval is slower than the target ratio",
    )


class BatchOnly:
    """The backend without its `stream`: the runner's batch path, one call per chunk."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def info(self):  # type: ignore[no-untyped-def]
        return self._backend.info()

    def generate(self, requests, sampling, mode):  # type: ignore[no-untyped-def]
        return self._backend.generate(requests, sampling, mode)


if __name__ == "__main__":
    sys.exit(main())
