r"""The `math` grader: symbolic equivalence with the `math_verify` package, run in a
process pool so that a pathological expression cannot hang the run.

How it works and what a user should know:

* Extraction: the (think-stripped) completion is parsed by ``math_verify.parse`` with
  ``\boxed{}`` given the highest priority, then "final answer" phrases and bare
  expressions (math_verify's own rules). The reference is parsed as LaTeX (wrapped in
  ``$...$`` unless it already has delimiters or a box). A reference math_verify cannot
  parse is an error row, not a wrong answer. A list/tuple reference means any of them.
* Isolation: grading runs in a ``ProcessPoolExecutor`` using the ``spawn`` start method
  (never ``fork``: the parent may hold threads from an inference engine) with a few
  workers. math_verify's own signal-based timeouts are switched off because they turn a
  timeout into a silent "wrong"; this module's timeout replaces them.
* Timeout: each item gets `timeout_s` seconds of wall time from the moment it is handed to
  an idle, already-started worker (at most one item per worker is in flight, and workers
  are started and have imported math_verify before any clock starts). An item that runs
  longer gets ``GradeResult(score=None, error="grader timeout after Xs")`` - an error row,
  never a 0 score. The hung worker cannot be interrupted, so the whole pool is killed and
  a fresh one started; the other items that were in flight are re-run.
* A worker process that dies (segfault, out of memory) breaks the pool: the items in
  flight are re-run one at a time, and the one that kills its worker again gets an error.
* The worker function is injectable (`MathGrader(worker=...)`) so tests can simulate hangs
  and crashes; it must be a module-level function (it is pickled by reference).
"""

from __future__ import annotations

import importlib
import logging
import math
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as FuturesTimeoutError
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from curate.errors import RunError
from curate.graders.base import (
    UNFINISHED_THINKING,
    GradeResult,
    GradingError,
    alternatives,
    check_lengths,
    describe_exception,
    error_result,
    failed,
)
from curate.graders.text import strip_think

# (completion, reference alternatives as text) -> (score in [0, 1], extracted answer)
WorkerFn = Callable[[str, tuple[str, ...]], tuple[float, str | None]]
# What crosses the process boundary: (score, extracted, error). Exceptions are turned into
# text in the worker, because unpickling an arbitrary exception class (sympy's, a user's)
# in the parent can fail and would take the whole pool down with it.
_Outcome = tuple[float | None, str | None, str | None]

DEFAULT_WORKERS = min(4, os.cpu_count() or 1)
# Starting a worker means a fresh interpreter importing sympy: allow it plenty of time,
# separately from (and before) any per-item clock.
STARTUP_TIMEOUT_S = 120.0
# Waiting for killed workers to exit; SIGKILL follows if SIGTERM was not enough.
_REAP_TIMEOUT_S = 5.0


def verify_one(completion: str, references: tuple[str, ...]) -> tuple[float, str | None]:
    """Grade one completion with math_verify. Runs inside a pool worker."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    gold: list[Any] = []
    for reference in references:
        gold.extend(_parse_reference(reference))
    if not gold:
        raise GradingError(f"math_verify could not parse the reference {references[0][:60]!r}")
    predicted = parse(
        completion,
        extraction_config=[LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
        parsing_timeout=None,  # the pool enforces the timeout
    )
    if not predicted:
        return 0.0, None
    # parse() returns [sympy_expr, source_text], or [source_text] when only a string matched.
    extracted = predicted[-1] if isinstance(predicted[-1], str) else str(predicted[0])
    ok = verify(gold, predicted, timeout_seconds=None)
    return (1.0 if ok else 0.0), extracted


def _parse_reference(reference: str) -> list[Any]:
    from math_verify import parse

    text = reference.strip()
    if not text:
        return []
    has_delimiters = any(mark in text for mark in ("$", "\\boxed", "\\(", "\\["))
    parsed: list[Any] = []
    if not has_delimiters:
        # Bare LaTeX ("\frac{1}{2}", "x^2+1") is only recognised inside math delimiters.
        parsed = parse(f"${text}$", parsing_timeout=None)
    if not parsed:
        parsed = parse(text, parsing_timeout=None)
    return list(parsed)


# Per-worker state, set by _init_worker in each pool process.
_BARRIER: Any = None


def _init_worker(barrier: Any, preload: tuple[str, ...]) -> None:
    global _BARRIER
    _BARRIER = barrier
    # Ctrl-C reaches the whole process group; the parent decides what to do (kill us).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # We disable math_verify's own timeouts on purpose; its warning about that is noise.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for module in preload:
        importlib.import_module(module)


def _wait_for_siblings(timeout_s: float) -> int:
    """Warm-up task: returns once every worker process is up and initialised."""
    if _BARRIER is not None:
        _BARRIER.wait(timeout_s)
    return os.getpid()


def _run_guarded(worker: WorkerFn, completion: str, references: tuple[str, ...]) -> _Outcome:
    try:
        score, extracted = worker(completion, references)
    except Exception as exc:
        return None, None, describe_exception(exc)
    return score, extracted, None


def _check_outcome(outcome: object) -> GradeResult:
    """Validate what came back from a worker (an injected worker may return anything)."""
    if not (isinstance(outcome, tuple) and len(outcome) == 3):
        return error_result(f"math grader worker returned {type(outcome).__name__}")
    score, extracted, error = outcome
    if error is not None:
        return error_result(str(error))
    if isinstance(score, bool) or not isinstance(score, int | float):
        return error_result(f"math grader worker returned a {type(score).__name__} score")
    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
        return error_result(f"math grader worker returned score {score!r}, outside [0, 1]")
    if extracted is not None and not isinstance(extracted, str):
        extracted = str(extracted)
    return GradeResult(score=float(score), extracted=extracted)


class MathGrader:
    """math_verify equivalence in a spawn process pool with a per-item timeout."""

    def __init__(
        self,
        name: str = "math",
        *,
        timeout_s: float = 10.0,
        workers: int = DEFAULT_WORKERS,
        worker: WorkerFn = verify_one,
        preload: tuple[str, ...] = ("math_verify",),
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a positive number, got {timeout_s!r}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers!r}")
        self.name = name
        self.timeout_s = timeout_s
        self.workers = workers
        self._worker = worker
        self._preload = preload
        self._startup_timeout_s = startup_timeout_s
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()  # one batch at a time: the pool's clocks assume it
        self.pool_starts = 0  # how many pools were started (observable in tests)

    # -- pool lifecycle ---------------------------------------------------------------

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is not None:
            return self._pool
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(self.workers)
        pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(barrier, self._preload),
        )
        # One warm-up per worker, each blocking on the barrier until all workers run it:
        # so every process exists and has imported math_verify before any item's clock starts.
        warmups = [
            pool.submit(_wait_for_siblings, self._startup_timeout_s) for _ in range(self.workers)
        ]
        try:
            for warmup in warmups:
                warmup.result(timeout=self._startup_timeout_s + 5.0)
        except BaseException as exc:
            _kill(pool)
            if isinstance(exc, Exception):
                raise RunError(
                    "the math grader could not start its worker processes "
                    "(a script that grades must guard its entry point with "
                    f"`if __name__ == '__main__':`): {describe_exception(exc)}"
                ) from exc
            raise
        self._pool = pool
        self.pool_starts += 1
        return pool

    def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            _kill(pool)

    def close(self) -> None:
        """Stop the worker processes. The grader can still be used: it starts a new pool."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = _processes(pool)
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(_REAP_TIMEOUT_S)
        _kill(pool)  # anything still alive after a grace period

    def __enter__(self) -> MathGrader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MathGrader({self.name!r}, timeout_s={self.timeout_s!r}, workers={self.workers})"

    # -- grading ----------------------------------------------------------------------

    def grade_batch(
        self, completions: Sequence[str], references: Sequence[object]
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        results: list[GradeResult | None] = [None] * len(completions)
        payloads: dict[int, tuple[str, tuple[str, ...]]] = {}
        for index, (completion, reference) in enumerate(zip(completions, references, strict=True)):
            try:
                answer_text = strip_think(completion)
                if answer_text is None:
                    results[index] = UNFINISHED_THINKING
                    continue
                options = tuple(_reference_latex(option) for option in alternatives(reference))
            except Exception as exc:
                results[index] = failed(exc)
                continue
            payloads[index] = (answer_text, options)
        if payloads:
            with self._lock:
                try:
                    self._run(payloads, results)
                except BaseException:
                    # Interrupted (Ctrl-C) or failed mid-batch: never leave workers running.
                    self._discard_pool()
                    raise
        return [
            result if result is not None else error_result("math grader lost this item")
            for result in results
        ]

    def _run(
        self,
        payloads: dict[int, tuple[str, tuple[str, ...]]],
        results: list[GradeResult | None],
    ) -> None:
        queue: deque[int] = deque(payloads)
        # Items that were in flight when a worker died: each re-runs alone, so the one that
        # kills its worker again is identified without blaming its neighbours.
        suspects: set[int] = set()
        in_flight: dict[Future[_Outcome], tuple[int, float]] = {}
        while queue or in_flight:
            pool = self._ensure_pool()
            while queue and len(in_flight) < self.workers:
                index = queue[0]
                if index in suspects and in_flight:
                    break
                queue.popleft()
                try:
                    future = pool.submit(_run_guarded, self._worker, *payloads[index])
                except BrokenProcessPool:
                    # A worker died between batches or items; what is in flight will report
                    # it below. With nothing in flight, start over on a fresh pool.
                    queue.appendleft(index)
                    if not in_flight:
                        self._discard_pool()
                    break
                in_flight[future] = (index, time.monotonic() + self.timeout_s)
                if index in suspects:
                    break
            if not in_flight:
                continue
            oldest = min(in_flight, key=lambda future: in_flight[future][1])
            remaining = max(0.0, in_flight[oldest][1] - time.monotonic())
            done, _ = wait(in_flight, timeout=remaining, return_when=FIRST_COMPLETED)
            # Nothing finished in time: the oldest item has used up its timeout.
            for future in done or {oldest}:
                index, _deadline = in_flight.pop(future)
                try:
                    outcome = future.result(timeout=0)
                except FuturesTimeoutError as exc:
                    # Must come before any generic handler: TimeoutError is an Exception.
                    if future.done():  # raised by the task itself, not a hang
                        results[index] = failed(exc)
                        continue
                    results[index] = error_result(f"grader timeout after {self.timeout_s:g}s")
                    self._restart_after_timeout(in_flight, queue, results)
                    break
                except BrokenProcessPool:
                    self._restart_after_crash(index, in_flight, queue, suspects, results)
                    break
                except Exception as exc:
                    results[index] = failed(exc)
                else:
                    results[index] = _check_outcome(outcome)

    def _restart_after_timeout(
        self,
        in_flight: dict[Future[_Outcome], tuple[int, float]],
        queue: deque[int],
        results: list[GradeResult | None],
    ) -> None:
        """The hung worker cannot be stopped alone: replace the pool, re-run the others."""
        finished = _harvest(in_flight, results)
        self._discard_pool()
        _requeue_front(queue, [index for index, _ in in_flight.values() if index not in finished])
        in_flight.clear()

    def _restart_after_crash(
        self,
        index: int,
        in_flight: dict[Future[_Outcome], tuple[int, float]],
        queue: deque[int],
        suspects: set[int],
        results: list[GradeResult | None],
    ) -> None:
        affected = [index, *(other for other, _ in in_flight.values())]
        finished = _harvest(in_flight, results)
        self._discard_pool()
        in_flight.clear()
        rerun: list[int] = []
        for item in affected:
            if item in finished:
                continue
            if item in suspects:  # it ran alone and its worker died again: it is the cause
                results[item] = error_result("math grader worker process died")
            else:
                suspects.add(item)
                rerun.append(item)
        _requeue_front(queue, rerun)


def _harvest(
    in_flight: dict[Future[_Outcome], tuple[int, float]], results: list[GradeResult | None]
) -> set[int]:
    """Keep the results of in-flight items that did finish before the pool goes away."""
    finished: set[int] = set()
    for future, (index, _deadline) in in_flight.items():
        if future.done() and not future.cancelled() and future.exception() is None:
            results[index] = _check_outcome(future.result())
            finished.add(index)
    return finished


def _requeue_front(queue: deque[int], indices: list[int]) -> None:
    queue.extendleft(reversed(sorted(indices)))


def _reference_latex(reference: object) -> str:
    if reference is None:
        raise GradingError("reference is missing (None)")
    if isinstance(reference, float) and math.isfinite(reference) and reference.is_integer():
        return str(int(reference))
    return str(reference)


def _processes(pool: ProcessPoolExecutor) -> list[multiprocessing.process.BaseProcess]:
    # Private, but before Python 3.14 (terminate_workers) it is the only handle on a worker.
    processes: dict[int, multiprocessing.process.BaseProcess] | None = getattr(
        pool, "_processes", None
    )
    return list(processes.values()) if processes else []


def _kill(pool: ProcessPoolExecutor) -> None:
    """Stop a pool whose workers may be hung: terminate, then kill what survives."""
    processes = _processes(pool)
    for process in processes:
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(_REAP_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join(_REAP_TIMEOUT_S)
