"""The worker pool behind every grader that runs code it does not control: `math`
(sympy can hang on a pathological expression), `python:` (a user's function), and the
trainer rewards (`verl`, `trl:`).

What every such grader gets from `PooledGrader`:

* Isolation: calls run in a ``ProcessPoolExecutor`` using the ``spawn`` start method
  (never ``fork``: the parent may hold threads from an inference engine) with a few
  workers. Each call runs in the *main thread* of its worker, so code that times itself
  with ``signal.alarm`` (math_verify, and reward functions built on it) works whichever
  thread of the parent called `grade_batch`: elsewhere math_verify raises, and reward
  functions that catch everything turn that into a silent 0.
* Deadline: each call gets `timeout_s` seconds of wall time from the moment it is handed
  to an idle, already-started worker (at most one call per worker is in flight, and
  workers are started, with their modules imported, before any clock starts). A call that
  runs longer gets ``grader timeout after Xs`` - an error row, never a 0 score. The hung
  worker cannot be interrupted, so the whole pool is killed and a fresh one started; the
  other calls that were in flight are re-run.
* Crashes: a worker process that dies (segfault, ``os._exit``, out of memory) breaks the
  pool: the calls in flight are re-run one at a time, and the one that kills its worker
  again gets ``<label> worker process died``.
* Exceptions raised by a call are turned into text inside the worker, because unpickling
  an arbitrary exception class (sympy's, a user's) in the parent can fail and would take
  the whole pool down with it.

Task functions must be module-level (they are pickled by reference).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import multiprocessing
import os
import signal
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as FuturesTimeoutError
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Self, TypeVar

from curate.errors import RunError, UsageError
from curate.graders.base import (
    UNFINISHED_THINKING,
    GradeResult,
    SampleContext,
    check_lengths,
    describe_exception,
    error_result,
    failed,
)
from curate.graders.text import strip_think

R = TypeVar("R")
# What crosses the process boundary: (value, error text).
Outcome = tuple[Any, str | None]
# Run once in each worker before it takes calls: (module-level function, its arguments).
WorkerSetup = tuple[Callable[..., object], tuple[Any, ...]]

DEFAULT_WORKERS = min(4, os.cpu_count() or 1)
# Starting a worker means a fresh interpreter importing sympy or a user's module: allow it
# plenty of time, separately from (and before) any per-call clock.
STARTUP_TIMEOUT_S = 120.0
# Waiting for killed workers to exit; SIGKILL follows if SIGTERM was not enough.
_REAP_TIMEOUT_S = 5.0

# Per-worker state, set by _init_worker in each pool process.
_BARRIER: Any = None


def _init_worker(barrier: Any, preload: tuple[str, ...], setup: WorkerSetup | None) -> None:
    global _BARRIER
    _BARRIER = barrier
    # Ctrl-C reaches the whole process group; the parent decides what to do (kill us).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The math grader disables math_verify's own timeouts on purpose; its warning is noise.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for module in preload:
        importlib.import_module(module)
    if setup is not None:
        function, arguments = setup
        function(*arguments)


def _wait_for_siblings(timeout_s: float) -> int:
    """Warm-up task: returns once every worker process is up and initialised."""
    if _BARRIER is not None:
        _BARRIER.wait(timeout_s)
    return os.getpid()


def _call_guarded(task: Callable[..., Any], arguments: tuple[Any, ...]) -> Outcome:
    try:
        return task(*arguments), None
    except Exception as exc:
        return None, describe_exception(exc)


def check_timeout(spec: str, timeout_s: float) -> None:
    """`UsageError` naming the spec unless the per-call deadline is a positive number."""
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise UsageError(f"grader {spec!r}: the timeout must be a positive number of seconds")


class PooledGrader:
    """Base class: runs each call of a task function in a spawn pool, with a deadline.

    Subclasses grading one rollout per call implement `payload` (the task's arguments,
    or a final `GradeResult` that needs no call) and `to_result` (the task's return value
    as a `GradeResult`); `grade_batch` does the rest. Subclasses that batch several
    rollouts into one call use `run_calls` directly.
    """

    name: str
    # What a user reads in "<label> worker process died".
    label: str = "grader"
    # Graders that read per-sample context set this (see `curate.graders.base.grade`).
    needs_context: bool = False

    def __init__(
        self,
        name: str,
        *,
        task: Callable[..., Any],
        timeout_s: float,
        workers: int = DEFAULT_WORKERS,
        preload: tuple[str, ...] = (),
        setup: WorkerSetup | None = None,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a positive number, got {timeout_s!r}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers!r}")
        self.name = name
        self.timeout_s = timeout_s
        self.workers = workers
        self._task = task
        self._preload = preload
        self._setup = setup
        self._startup_timeout_s = startup_timeout_s
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()  # one batch at a time: the pool's clocks assume it
        self.pool_starts = 0  # how many pools were started (observable in tests)
        # A grader dropped without close() must not leave idle processes behind: the
        # finalizer holds the list of live pools, never the grader itself.
        self._live: list[ProcessPoolExecutor] = []
        weakref.finalize(self, _kill_all, self._live)

    # -- one rollout per call -----------------------------------------------------------

    def payload(
        self, completion: str, reference: object, context: SampleContext | None
    ) -> tuple[Any, ...] | GradeResult:
        """The task's arguments for one rollout, or its final result without a call.

        The default strips reasoning: an unfinished ``<think>`` block scores 0.0.
        """
        answer_text = strip_think(completion)
        if answer_text is None:
            return UNFINISHED_THINKING
        return (answer_text, reference)

    def to_result(self, value: object) -> GradeResult:
        """What the task returned, as a `GradeResult` (raise `GradingError` if it is bad)."""
        raise NotImplementedError

    def grade_batch(
        self,
        completions: Sequence[str],
        references: Sequence[object],
        contexts: Sequence[SampleContext] | None = None,
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        if contexts is not None:
            check_lengths(completions, contexts)
        results: list[GradeResult | None] = [None] * len(completions)
        payloads: dict[int, tuple[Any, ...]] = {}
        for index, (completion, reference) in enumerate(zip(completions, references, strict=True)):
            try:
                prepared = self.payload(
                    completion, reference, contexts[index] if contexts is not None else None
                )
            except Exception as exc:  # one bad rollout must not sink the batch
                results[index] = failed(exc)
                continue
            if isinstance(prepared, GradeResult):
                results[index] = prepared
            else:
                payloads[index] = prepared
        done = self.run_calls(payloads, self._checked, error_result)
        for index, result in done.items():
            results[index] = result
        return [
            result if result is not None else error_result(f"{self.label} lost this item")
            for result in results
        ]

    def _checked(self, value: object) -> GradeResult:
        try:
            return self.to_result(value)
        except Exception as exc:
            return failed(exc)

    # -- the pool -------------------------------------------------------------------------

    def run_calls(
        self,
        payloads: dict[int, tuple[Any, ...]],
        convert: Callable[[object], R],
        fail: Callable[[str], R],
    ) -> dict[int, R]:
        """Run the task on each payload; `convert` a returned value, `fail` an error text.

        Returns key -> result for every payload key. Raises only on interruption or when
        the pool cannot start (a `RunError`); then no worker is left running.
        """
        results: dict[int, R] = {}
        if not payloads:
            return results
        with self._lock:
            try:
                self._run(payloads, results, convert, fail)
            except BaseException:
                # Interrupted (Ctrl-C) or failed mid-batch: never leave workers running.
                self._discard_pool()
                raise
        return results

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is not None:
            return self._pool
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(self.workers)
        pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(barrier, self._preload, self._setup),
        )
        # One warm-up per worker, each blocking on the barrier until all workers run it:
        # so every process exists and has imported its modules before any clock starts.
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
                    f"the {self.label} could not start its worker processes "
                    "(a script that grades must guard its entry point with "
                    f"`if __name__ == '__main__':`): {describe_exception(exc)}"
                ) from exc
            raise
        self._pool = pool
        self.pool_starts += 1
        self._live[:] = [pool]
        return pool

    def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        self._live.clear()
        if pool is not None:
            _kill(pool)

    def close(self) -> None:
        """Stop the worker processes. The grader can still be used: it starts a new pool."""
        pool, self._pool = self._pool, None
        self._live.clear()
        if pool is None:
            return
        processes = _processes(pool)
        manager = getattr(pool, "_executor_manager_thread", None)  # private, like _processes
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(_REAP_TIMEOUT_S)
        _kill(pool)  # anything still alive after a grace period
        # The executor's manager thread reaps the workers as well. Wait for it: while it
        # runs, its waitpid can race a caller's, and the loser reads a reaped worker as
        # alive (is_alive() after close() was True about one time in three).
        if manager is not None:
            manager.join(_REAP_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, timeout_s={self.timeout_s!r}, "
            f"workers={self.workers})"
        )

    def _run(
        self,
        payloads: dict[int, tuple[Any, ...]],
        results: dict[int, R],
        convert: Callable[[object], R],
        fail: Callable[[str], R],
    ) -> None:
        queue: deque[int] = deque(payloads)
        # Calls that were in flight when a worker died: each re-runs alone, so the one that
        # kills its worker again is identified without blaming its neighbours.
        suspects: set[int] = set()
        in_flight: dict[Future[Outcome], tuple[int, float]] = {}

        def outcome(value: Outcome) -> R:
            returned, error = value
            return fail(error) if error is not None else convert(returned)

        while queue or in_flight:
            pool = self._ensure_pool()
            while queue and len(in_flight) < self.workers:
                key = queue[0]
                if key in suspects and in_flight:
                    break
                queue.popleft()
                try:
                    future = pool.submit(_call_guarded, self._task, payloads[key])
                except BrokenProcessPool:
                    # A worker died between batches or calls; what is in flight will report
                    # it below. With nothing in flight, start over on a fresh pool.
                    queue.appendleft(key)
                    if not in_flight:
                        self._discard_pool()
                    break
                in_flight[future] = (key, time.monotonic() + self.timeout_s)
                if key in suspects:
                    break
            if not in_flight:
                continue
            oldest = min(in_flight, key=lambda future: in_flight[future][1])
            remaining = max(0.0, in_flight[oldest][1] - time.monotonic())
            done, _ = wait(in_flight, timeout=remaining, return_when=FIRST_COMPLETED)
            # Nothing finished in time: the oldest call has used up its time.
            for future in done or {oldest}:
                key, _deadline = in_flight.pop(future)
                try:
                    value = future.result(timeout=0)
                except FuturesTimeoutError as exc:
                    # Must come before any generic handler: TimeoutError is an Exception.
                    if future.done():  # raised by the task itself, not a hang
                        results[key] = fail(describe_exception(exc))
                        continue
                    results[key] = fail(f"grader timeout after {self.timeout_s:g}s")
                    self._restart(in_flight, queue, results, outcome)
                    break
                except BrokenProcessPool:
                    affected = [key, *(other for other, _ in in_flight.values())]
                    finished = self._restart(in_flight, queue, results, outcome, requeue=False)
                    rerun: list[int] = []
                    for item in affected:
                        if item in finished:
                            continue
                        if item in suspects:  # it ran alone and its worker died again
                            results[item] = fail(f"{self.label} worker process died")
                        else:
                            suspects.add(item)
                            rerun.append(item)
                    _requeue_front(queue, rerun)
                    break
                except Exception as exc:
                    results[key] = fail(describe_exception(exc))
                else:
                    results[key] = outcome(value)

    def _restart(
        self,
        in_flight: dict[Future[Outcome], tuple[int, float]],
        queue: deque[int],
        results: dict[int, R],
        outcome: Callable[[Outcome], R],
        *,
        requeue: bool = True,
    ) -> set[int]:
        """Replace the pool (a hung or dead worker cannot be stopped alone).

        Keeps the results of in-flight calls that did finish; re-queues the others
        when `requeue`. Returns the keys that finished.
        """
        finished: set[int] = set()
        for future, (key, _deadline) in in_flight.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                results[key] = outcome(future.result())
                finished.add(key)
        self._discard_pool()
        if requeue:
            _requeue_front(queue, [key for key, _ in in_flight.values() if key not in finished])
        in_flight.clear()
        return finished


def _requeue_front(queue: deque[int], keys: list[int]) -> None:
    queue.extendleft(reversed(sorted(keys)))


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


def _kill_all(pools: list[ProcessPoolExecutor]) -> None:
    """Finalizer for a grader that was garbage-collected (or left at exit) unclosed."""
    for pool in pools:
        # At interpreter exit, half the world may be gone already.
        with contextlib.suppress(Exception):
            _kill(pool)
    pools.clear()
