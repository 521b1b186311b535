"""Benchmark: the Ray pool (`curate eval --backend vllm --ray ... --replicas K`).

Three figures, each against a baseline measured in the same run:

  driver   how many rollouts per second the driver grades and stores: `run_eval` over a
           stream that hands back finished generations at once (short completions,
           the numeric grader, real Parquet shards), and the same through a Ray pool of
           fake-backend replicas (Ray transfer and decoding included). The rate
           the driver sustains is the ceiling of any cluster: the replicas together
           must produce less than this or they wait for the driver.
  vllm     the tiny model on the CPU build: one engine in this process, then Ray
           pools of 1 and 2 replicas; wall time including engine start, and the
           generation rate once the first batch is back (start-up excluded).

    python benchmarks/bench_ray.py [--part driver|vllm|all] [--rollouts 32] [--samples 300]

On a 2-core machine two replicas share the same two cores: expect less than 2x.
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

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "sample_data" / "tiny-math"
DATA = ROOT / "sample_data" / "arithmetic.jsonl"


class InstantStream:
    """A StreamingBackend whose generations are ready at once: the driver's ceiling."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def info(self) -> Any:
        from curate.backends.base import BackendInfo

        return BackendInfo(model="instant", has_chat_template=False)

    def generate(self, requests: Sequence[Any], sampling: Any, mode: Any) -> list[list[Any]]:
        return [gens for _, gens in self._all(requests)]

    def stream(self, requests: Sequence[Any], sampling: Any, mode: Any) -> Iterator[Any]:
        yield from self._all(requests)

    def _all(self, requests: Sequence[Any]) -> Iterator[tuple[int, list[Any]]]:
        from curate.backends.base import Generation

        for index, req in enumerate(requests):
            right = self.answers[req.sample_id]
            yield (
                index,
                [
                    Generation(
                        text=right if (req.first_run + k) % 3 else f"{right}1",
                        finish_reason="stop",
                        prompt_tokens=12,
                        completion_tokens=3,
                        latency_s=0.0,
                    )
                    for k in range(req.n)
                ],
            )


def _workload(samples: int) -> tuple[dict[str, str], dict[str, str]]:
    prompts = {f"s{i:06d}": f"What is {i} + {i}?" for i in range(samples)}
    refs = {sid: str(2 * int(sid[1:])) for sid in prompts}
    return prompts, refs


def _run(backend: Any, prompts: dict[str, Any], refs: dict[str, Any], runs: int, **kw: Any) -> Any:
    from curate.evaluation.runner import run_eval
    from curate.graders import get_grader
    from curate.store.run_dir import RolloutStore

    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        store = RolloutStore(Path(tmp) / "run")
        store.create()
        grader = get_grader("numeric")
        try:
            start = time.perf_counter()
            result = run_eval(
                store,
                backend=backend,
                grader=grader,
                prompts=prompts,
                references=refs,
                runs=runs,
                **kw,
            )
            seconds = time.perf_counter() - start
        finally:
            grader.close()
        assert result.rollouts == len(prompts) * runs, result
    return seconds


def bench_driver(args: argparse.Namespace) -> None:
    import ray

    from curate.backends.fake import FakeOptions
    from curate.backends.ray_pool import RayPoolOptions, open_ray_pool

    prompts, refs = _workload(args.driver_samples)
    total = len(prompts) * args.runs
    _run(InstantStream(refs), prompts, refs, args.runs, mode="completion")  # warm-up
    times = [
        _run(InstantStream(refs), prompts, refs, args.runs, mode="completion") for _ in range(3)
    ]
    best = min(times)
    print(
        f"driver: {total:,} rollouts graded and stored in {best:.2f} s "
        f"(best of 3) = {total / best:,.0f} rollouts/s on one core"
    )
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=512 << 20)
    try:
        answers = {p: (refs[sid], 0.6) for sid, p in prompts.items()}
        pool = RayPoolOptions(replicas=2)
        with open_ray_pool("fake", "fake", FakeOptions(answers=answers), pool) as backend:
            arrivals: list[float] = []
            stream = backend.stream

            def timed(*a: Any) -> Iterator[Any]:
                for item in stream(*a):
                    if item is not None:
                        arrivals.append(time.perf_counter())
                    yield item

            backend.stream = timed  # type: ignore[method-assign]
            seconds = _run(backend, prompts, refs, args.runs, mode="completion")
        first = arrivals[0] - (arrivals[-1] - seconds) if arrivals else 0.0
        steady = (len(arrivals) - 1) * args.runs / max(1e-9, arrivals[-1] - arrivals[0])
        print(
            f"driver via Ray (2 fake replicas): {total:,} rollouts in {seconds:.1f} s wall "
            f"({first:.1f} s to the first batch: actor start); "
            f"{steady:,.0f} rollouts/s once batches flow = {steady / (total / best):.2f}x "
            "the bare driver"
        )
    finally:
        ray.shutdown()


def bench_vllm(args: argparse.Namespace) -> None:
    import ray

    from curate.backends.base import SamplingConfig
    from curate.backends.vllm_entry import open_vllm_backend
    from curate.backends.vllm_options import VllmOptions
    from curate.data.samples import load_samples, prompts_by_id, references_by_id

    frame, fields = load_samples(DATA, limit=args.samples)
    prompts = prompts_by_id(frame, fields, "chat")
    refs = references_by_id(frame, fields)
    total = len(prompts) * args.runs
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)
    engine = {"kv_cache_memory_gb": 0.25}
    kw = {"sampling": sampling, "mode": "chat", "chunk_size": 512}

    start = time.perf_counter()
    with open_vllm_backend(str(TINY), VllmOptions.parse(engine)) as backend:
        started = time.perf_counter() - start
        gen = _run(backend, prompts, refs, args.runs, **kw)
    single = total / gen
    print(
        f"single process: engine start {started:.1f} s, {total:,} rollouts in {gen:.1f} s "
        f"= {single:,.0f} rollouts/s; wall {started + gen:.1f} s"
    )
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=512 << 20)
    try:
        rates = {}
        for replicas in (1, 2):
            options = VllmOptions.parse({**engine, "ray": "auto", "replicas": replicas})
            t0 = time.perf_counter()
            with open_vllm_backend(str(TINY), options) as backend:
                run = _run(backend, prompts, refs, args.runs, **kw)
                batches = backend.batches  # type: ignore[attr-defined]
            wall = time.perf_counter() - t0
            # The replicas' own clocks: from the first batch an engine started on to the
            # last one it finished, so engine start-up is left out as on the other side.
            busy = max(b.finished for b in batches) - min(b.started for b in batches)
            rate = sum(b.rollouts for b in batches) / busy
            rates[replicas] = rate
            print(
                f"ray, {replicas} replica(s): run_eval {run:.1f} s incl. replica start, "
                f"wall {wall:.1f} s; engines busy {busy:.1f} s = {rate:,.0f} rollouts/s "
                f"= {rate / single:.2f}x the single process"
            )
        print(f"2 replicas vs 1: {rates[2] / rates[1]:.2f}x (2 cores shared by both)")
    finally:
        ray.shutdown()


def _load() -> str:
    import os

    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("driver", "vllm", "all"), default="all")
    parser.add_argument("--rollouts", dest="runs", type=int, default=32)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--driver-samples", type=int, default=2_000)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, {_load()} at the start")
    if args.part in ("driver", "all"):
        bench_driver(args)
    if args.part in ("vllm", "all"):
        bench_vllm(args)
    print(f"{_load()} at the end (other processes share these cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
