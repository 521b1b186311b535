"""What the eval benchmarks share: their workload, the timed curate side, and the
timing loop (warm both sides up, then time them in alternating order and compare medians)."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from curate.backends.base import Backend, Mode, Prompt, SamplingConfig
    from curate.evaluation.runner import EvalResult
    from curate.evaluation.spec import Evaluation

Timer = Callable[[], float]  # runs the workload once, returns its wall time in seconds


def alternate(bare: Timer, curate: Timer, repeat: int) -> tuple[list[float], list[float]]:
    """Time `bare` and `curate` `repeat` times each after one untimed warm-up of both;
    returns (bare times, curate times), pair i measured back to back."""
    bare()  # warm-up: the first runs pay one-off costs on both sides
    curate()
    bare_t: list[float] = []
    cur_t: list[float] = []
    for i in range(repeat):
        # Alternate the order so drift on a shared machine hits both sides.
        if i % 2 == 0:
            bare_t.append(bare())
            cur_t.append(curate())
        else:
            cur_t.append(curate())
            bare_t.append(bare())
    return bare_t, cur_t


def medians(bare_t: list[float], cur_t: list[float]) -> tuple[float, float]:
    """The median time of each side."""
    return statistics.median(bare_t), statistics.median(cur_t)


def verdict(missed: bool, no_check: bool, failure: str) -> int:
    """The exit code: 1 (with `failure` on stderr) when the target is missed and checked."""
    if missed and not no_check:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1
    return 0


def load_workload(data: str, limit: int | None = None) -> tuple[dict[str, Prompt], dict[str, Any]]:
    """(chat prompt, reference) by sample id for the first `limit` samples of `data`."""
    from curate.data.samples import load_samples, prompts_by_id, references_by_id

    frame, fields = load_samples(data, limit=limit)
    return prompts_by_id(frame, fields, "chat"), references_by_id(frame, fields)


def numeric_evaluation(
    backend: Backend,
    prompts: dict[str, Prompt],
    refs: dict[str, Any],
    runs: int,
    sampling: SamplingConfig,
    *,
    mode: Mode = "chat",
    seed: int = 0,
    chunk_size: int | None = None,
) -> Evaluation:
    """The benchmarks' Evaluation: the numeric grader (the caller closes it) and
    `chunk_size` None for the engine's default."""
    from curate.evaluation.spec import DEFAULT_CHUNK_SIZE, Evaluation
    from curate.graders import get_grader

    return Evaluation(
        backend=backend,
        grader=get_grader("numeric"),
        prompts=prompts,
        references=refs,
        sampling=sampling,
        mode=mode,
        seed=seed,
        runs=runs,
        chunk_size=chunk_size or DEFAULT_CHUNK_SIZE,
    )


def timed_eval(
    backend: Backend,
    prompts: dict[str, Prompt],
    refs: dict[str, Any],
    runs: int,
    sampling: SamplingConfig,
    *,
    seed: int = 0,
    chunk_size: int | None = None,
) -> tuple[float, EvalResult]:
    """(seconds, result) of one chat-mode `run_eval` (numeric grader) into a fresh run
    directory, with every rollout checked to be stored; chunk_size None: the default."""
    from curate.evaluation.runner import run_eval
    from curate.store.run_dir import RolloutStore

    rollouts = len(prompts) * runs
    evaluation = numeric_evaluation(
        backend, prompts, refs, runs, sampling, seed=seed, chunk_size=chunk_size
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = RolloutStore(Path(tmp) / "run")
        start = time.perf_counter()
        result = run_eval(store, evaluation)
        elapsed = time.perf_counter() - start
        assert result.rollouts == rollouts, result
        assert store.rollouts(["sample_id", "rollout_idx"]).height == rollouts
    evaluation.grader.close()
    return elapsed, result
