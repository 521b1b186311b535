"""The evaluation engine: plan the missing rollouts, generate in chunks, grade,
and write each chunk as a shard as soon as it is done. The run directory is the
cache: a re-run does only the (sample_id, run_idx) pairs that are not stored.

`run_eval(store, evaluation)` draws what an `Evaluation` (curate/engine/spec.py)
describes; the adaptive driver calls it once per round."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curate.backends.base import (
    Backend,
    Generation,
    GenerationRequest,
    Mode,
    Prompt,
    SamplingConfig,
    StreamingBackend,
)
from curate.core.rollout import Rollout, rollout_columns
from curate.core.seeds import derive_seed
from curate.engine.progress import NullProgress, OutcomeTally, Progress
from curate.engine.spec import DEFAULT_CHUNK_SIZE, Evaluation, evaluation_of
from curate.errors import CurateError, RunError, one_line
from curate.graders import Grader
from curate.store.run_dir import RolloutStore

if TYPE_CHECKING:
    import polars as pl

__all__ = ["DEFAULT_CHUNK_SIZE", "EvalResult", "Evaluation", "plan_requests", "run_eval"]
# A streaming backend's finished rollouts reach disk at least this often.
FLUSH_SECONDS = 2.0
# What planning needs of the stored rollouts.
OUTCOME_COLUMNS = ("sample_id", "run_idx", "score", "error")


@dataclass
class EvalResult:
    rollouts: int = 0
    errors: int = 0
    truncated: int = 0
    skipped: int = 0  # already stored before this run
    seconds: float = 0.0
    shards: int = 0


def target_runs(runs: int | Mapping[str, int], sample_id: str) -> int:
    """How many runs (run_idx 0..target-1) a sample should have; 0 when not listed."""
    if isinstance(runs, int):
        return runs
    return int(runs.get(sample_id, 0))


def stored_outcomes(store: RolloutStore) -> pl.DataFrame | None:
    """The store's de-duplicated rollouts (OUTCOME_COLUMNS); None before the first shard."""
    return store.rollouts(list(OUTCOME_COLUMNS)) if store.shard_paths() else None


def plan_requests(
    prompts: Mapping[str, Prompt],
    runs: int | Mapping[str, int],
    done: set[tuple[str, int]],
    base_seed: int,
) -> list[GenerationRequest]:
    """One request per contiguous block of missing runs of a sample.

    `runs` is one count for every sample, or a per-sample target (adaptive rounds);
    a sample missing from the mapping gets nothing.
    """
    requests = []
    for sid, prompt in prompts.items():
        target = target_runs(runs, sid)
        if target <= 0:
            continue
        missing = [r for r in range(target) if (sid, r) not in done]
        for start, count in _blocks(missing):
            requests.append(
                GenerationRequest(
                    sample_id=sid,
                    prompt=prompt,
                    n=count,
                    first_run=start,
                    seed=derive_seed(base_seed, sid, start),
                )
            )
    return requests


def _blocks(indices: list[int]) -> Iterator[tuple[int, int]]:
    start = prev = None
    for i in indices:
        if start is None:
            start = prev = i
        elif i == prev + 1:  # type: ignore[operator]
            prev = i
        else:
            yield start, prev - start + 1  # type: ignore[operator]
            start = prev = i
    if start is not None:
        yield start, prev - start + 1  # type: ignore[operator]


def _chunks(items: Sequence[GenerationRequest], size: int) -> Iterator[Sequence[GenerationRequest]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def grade_generations(
    requests: Sequence[GenerationRequest],
    generations: Sequence[Sequence[Generation]],
    references: Mapping[str, Any],
    grader: Grader,
) -> dict[str, list[Any]]:
    """Rollout rows (column -> values) for a chunk; failed generations become error rows."""
    records: list[Rollout] = []
    to_grade: list[int] = []
    for req, gens in zip(requests, generations, strict=True):
        for offset, gen in enumerate(gens):
            record = Rollout(
                sample_id=req.sample_id,
                run_idx=req.first_run + offset,
                error=gen.error,
                completion=gen.text,
                finish_reason=gen.finish_reason,
                truncated=gen.finish_reason == "length",
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
                latency_s=gen.latency_s,
                seed=req.seed if gen.seed is None else gen.seed,
                attempts=gen.attempts,
            )
            if gen.error is None:
                if gen.text is None:
                    record.error = "backend returned no text"
                else:
                    to_grade.append(len(records))
            records.append(record)
    if to_grade:
        # Graders are pure functions of (completion, reference): grade each distinct
        # pair once. Short answers repeat a lot across a sample's rollouts.
        pairs = [(records[i].completion or "", records[i].sample_id) for i in to_grade]
        unique = list(dict.fromkeys(pairs))
        results = grader.grade_batch(
            [text for text, _ in unique], [references[sid] for _, sid in unique]
        )
        by_pair = dict(zip(unique, results, strict=True))
        for i, pair in zip(to_grade, pairs, strict=True):
            res, record = by_pair[pair], records[i]
            record.extracted = res.extracted
            if res.error is not None:
                record.error = f"grader: {res.error}"
            else:
                record.score = res.score
    return rollout_columns(records)


def _generate(
    backend: Backend,
    requests: Sequence[GenerationRequest],
    sampling: SamplingConfig,
    mode: Mode,
    chunk_size: int,
) -> Iterator[tuple[Sequence[GenerationRequest], Sequence[Sequence[Generation]]]]:
    """Batches of (requests, their generations), ready to grade and store.

    A batch backend is called once per chunk. A streaming backend is consumed as
    results arrive and flushed every FLUSH_SECONDS (or chunk_size requests), so a
    killed run loses at most what was in flight.
    """
    if isinstance(backend, StreamingBackend):
        done_reqs: list[GenerationRequest] = []
        done_gens: list[list[Generation]] = []
        last = time.monotonic()
        try:
            for item in _guard(lambda: backend.stream(requests, sampling, mode)):
                if item is not None:  # None is a heartbeat: nothing new, time to flush?
                    index, gens = item
                    done_reqs.append(requests[index])
                    done_gens.append(gens)
                now = time.monotonic()
                if done_reqs and (len(done_reqs) >= chunk_size or now - last >= FLUSH_SECONDS):
                    yield done_reqs, done_gens
                    done_reqs, done_gens, last = [], [], now
        except (Exception, KeyboardInterrupt):
            # Whatever stops the stream, what finished before it reaches disk first.
            if done_reqs:
                yield done_reqs, done_gens
            raise
        if done_reqs:
            yield done_reqs, done_gens
        return
    for chunk in _chunks(requests, max(1, chunk_size)):
        yield chunk, _call(lambda c=chunk: backend.generate(c, sampling, mode))


def _call(fn):  # type: ignore[no-untyped-def]
    """Run a backend call; an unexpected exception stops the run with one line."""
    try:
        return fn()
    except CurateError:
        raise
    except Exception as exc:
        first = one_line(exc)
        raise RunError(f"generation failed: {type(exc).__name__}: {first}") from exc


def _guard(make_iter):  # type: ignore[no-untyped-def]
    """Iterate a backend stream, turning its unexpected exceptions into RunError."""
    iterator = _call(make_iter)
    end = object()
    while True:
        item = _call(lambda: next(iterator, end))
        if item is end:
            return
        yield item


def run_eval(
    store: RolloutStore,
    evaluation: Evaluation | None = None,
    *,
    progress: Progress | None = None,
    stored: pl.DataFrame | None = None,
    **fields: Any,
) -> EvalResult:
    """Generate and grade every missing (sample_id, run_idx) with run_idx below the
    evaluation's run count (or per-sample target).

    `fields` are the Evaluation's own, for callers that spell them out
    (`run_eval(store, backend=..., grader=..., ...)`). `stored` is the store's
    de-duplicated rollouts (sample_id, run_idx, score, error) when the caller has just
    read them (the adaptive loop does, every round), to save a second read.
    """
    import polars as pl

    ev = evaluation_of(evaluation, fields)
    prompts, runs = ev.prompts, ev.runs
    progress = progress or NullProgress()
    existing = stored if stored is not None else stored_outcomes(store)
    done: set[tuple[str, int]] = set()
    tally = OutcomeTally()
    if existing is not None and existing.height:
        scored = existing.filter(
            pl.col("error").is_null() & pl.col("sample_id").is_in(list(prompts))
        )
        sids, run_idxs = scored["sample_id"].to_list(), scored["run_idx"].to_list()
        done = set(zip(sids, run_idxs, strict=True))
        tally.add_many(
            (s, v)
            for s, r, v in zip(sids, run_idxs, scored["score"].to_list(), strict=True)
            if r < target_runs(runs, s)
        )
    requests = plan_requests(prompts, runs, done, ev.seed)
    total = sum(target_runs(runs, sid) for sid in prompts)
    todo = sum(r.n for r in requests)
    result = EvalResult(skipped=total - todo)
    start = time.perf_counter()
    progress.start(total, total - todo, tally)

    def store_chunk(
        chunk: Sequence[GenerationRequest], generations: Sequence[Sequence[Generation]]
    ) -> None:
        cols = grade_generations(chunk, generations, ev.references, ev.grader)
        frame = pl.DataFrame(cols, schema_overrides={"run_idx": pl.Int32})
        store.append(frame)
        n = frame.height
        errors = sum(e is not None for e in cols["error"])
        result.rollouts += n
        result.errors += errors
        result.truncated += sum(bool(t) for t in cols["truncated"])
        result.shards += 1
        tally.add_many(zip(cols["sample_id"], cols["score"], strict=True))
        progress.advance(n, errors, tally)

    batches = _generate(ev.backend, requests, ev.sampling, ev.mode, ev.chunk_size)
    try:
        if isinstance(ev.backend, StreamingBackend):
            # Results already arrive on the backend's own thread: store them in order.
            for chunk, generations in batches:
                store_chunk(chunk, generations)
        else:
            # Grade and write chunk k on a worker thread while the engine generates
            # chunk k+1; at most one chunk waits, so a crash loses at most two.
            pending: Future[None] | None = None
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="curate-store") as pool:
                for chunk, generations in batches:
                    if pending is not None:
                        pending.result()
                    pending = pool.submit(store_chunk, chunk, generations)
                if pending is not None:
                    pending.result()
    finally:
        progress.finish()
        result.seconds = time.perf_counter() - start
    return result
