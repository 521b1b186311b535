"""The evaluation engine: plan the missing rollouts, generate in chunks, grade,
and write each chunk as a shard as soon as it is done. The run directory is the
cache: a re-run does only the (sample_id, rollout_idx) pairs that are not stored.

`run_eval(store, evaluation)` draws what an `Evaluation` (curate/evaluation/spec.py)
describes; the adaptive driver calls it once per round."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
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
from curate.core.reasoning import (
    DEFAULT_TRUNCATION,
    TRUNCATED_ERROR_PREFIX,
    TRUNCATION_POLICIES,
    Truncation,
    at_last_token,
    cut_short,
    joined,
    separated,
    split_reasoning,
)
from curate.core.rollout import Rollout, rollout_columns
from curate.core.seeds import derive_seed
from curate.core.settled import SETTLED_COLUMN, settled_error_expr
from curate.data.sanity import ANSWER_GRADERS, FormWatch, index_column
from curate.errors import CurateError, RunError, one_line
from curate.evaluation.progress import NullProgress, OutcomeTally, Progress
from curate.evaluation.r3 import R3Stage, r3_stage
from curate.evaluation.spec import DEFAULT_CHUNK_SIZE, Evaluation, evaluation_of
from curate.graders import Grader
from curate.graders.base import SampleContext, grade, needs_context, sees_reasoning
from curate.graders.r3 import is_group_prefill
from curate.graders.registry import grader_kind
from curate.stats.confidence import DEFAULT_WINDOW, trace_summary
from curate.store.run_dir import RolloutStore

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "EvalResult",
    "Evaluation",
    "GradingWatch",
    "plan_requests",
    "run_eval",
    "sample_contexts",
]
# A streaming backend's finished rollouts reach disk at least this often.
FLUSH_SECONDS = 2.0
# What planning needs of the stored rollouts.
OUTCOME_COLUMNS = ("sample_id", "rollout_idx", "score", "error", SETTLED_COLUMN)
# What a grader's failure on one rollout looks like in the store's `error` column.
GRADER_ERROR_PREFIX = "grader: "
# The early stop (`GradingWatch`): judged on the first chunk, or on the first
# WATCH_ROLLOUTS graded rollouts if a chunk holds more, never on fewer than WATCH_MIN
# (one sample's rollouts failing is not a broken grader).
WATCH_ROLLOUTS = 200
WATCH_MIN = 8
# One message on this share of the graded rollouts is the grader failing, not the data.
WATCH_SHARE = 0.95


@dataclass
class EvalResult:
    rollouts: int = 0
    errors: int = 0
    settled: int = 0  # errors among them that recur on a re-run (curate.core.settled)
    truncated: int = 0
    skipped: int = 0  # already stored before this run
    seconds: float = 0.0
    shards: int = 0
    # Error message -> rollouts of this run that failed with it (generation or grading).
    error_messages: Counter[str] = field(default_factory=Counter)
    # The policy model's tokens for this call's rollouts (None counts as 0).
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # `--grader r3`'s prefills (curate/evaluation/r3.py): sequences scored, their tokens and
    # seconds (inside `seconds`).
    prefills: int = 0
    prefill_tokens: int = 0
    prefill_seconds: float = 0.0


@dataclass
class GradingWatch:
    """Stops a run whose grader fails on (nearly) every rollout, after the first chunk.

    A grader that cannot read the references, or whose reward function raises, turns
    every rollout into an error row: the run would otherwise go to the end and report
    nothing but errors. The first graded rollouts are judged once (see WATCH_*): all
    grader errors, or one message on at least WATCH_SHARE of them, stops the run.
    """

    grader: str
    graded: int = 0  # rollouts that reached the grader
    messages: Counter[str] = field(default_factory=Counter)  # grader errors among them
    decided: bool = False

    def observe(self, errors: Sequence[str | None]) -> None:
        """Count one stored chunk's rows: `errors` is its `error` column."""
        for error in errors:
            if error is None:
                self.graded += 1
            elif error.startswith(GRADER_ERROR_PREFIX):
                self.graded += 1
                self.messages[error.removeprefix(GRADER_ERROR_PREFIX)] += 1

    def verdict(self, *, chunk_done: bool = True) -> str | None:
        """The reason to stop, once enough is seen (None: carry on); judged only once."""
        if self.decided or self.graded < WATCH_MIN:
            return None
        if not chunk_done and self.graded < WATCH_ROLLOUTS:
            return None
        self.decided = True
        failed = sum(self.messages.values())
        if not failed:
            return None
        message, count = self.messages.most_common(1)[0]
        if failed < self.graded and count < WATCH_SHARE * self.graded:
            return None
        head = f"grader {self.grader!r} failed on "
        if failed == self.graded:
            head += f"all of the first {self.graded} graded rollouts"
        else:
            head += f"{failed} of the first {self.graded} graded rollouts"
        if len(self.messages) == 1:
            head += f": {message}"
        else:
            head += f"; the most frequent of {len(self.messages)} messages ({count}x): {message}"
        return (
            f"{head}. Stopped early; those rollouts are stored: fix the grader or the "
            "references and re-run the same command to resume"
        )


def form_watch(grader: Grader, references: Mapping[str, Any], store: RolloutStore) -> FormWatch:
    """The form check of the first graded rollouts (curate/data/sanity.py)."""

    kind = grader_kind(getattr(grader, "name", ""))
    indices = False
    if kind in ANSWER_GRADERS:
        samples = store.read_samples()
        indices = samples is not None and index_column(samples, references) is not None
    return FormWatch(kind, references, indices=indices)


def sample_contexts(
    samples: pl.DataFrame | None, prompts: Mapping[str, Prompt]
) -> dict[str, SampleContext]:
    """Each sample's row (data_source, reward_model, extra_info, ...) for the graders
    that read it (verl, trl), with `prompt` set to the prompt as the model saw it (the
    chat messages, or the text). `samples` is a frame from `load_samples` (or the run
    directory's samples file); curate's own `sample_id` column is left out."""
    rows: dict[str, dict[str, Any]] = {}
    if samples is not None and "sample_id" in samples.columns:
        for row in samples.iter_rows(named=True):
            sid = str(row.pop("sample_id"))
            if sid in prompts:
                rows[sid] = row
    return {sid: {**rows.get(sid, {}), "prompt": prompt} for sid, prompt in prompts.items()}


def target_runs(runs: int | Mapping[str, int], sample_id: str) -> int:
    """How many runs (rollout_idx 0..target-1) a sample should have; 0 when not listed."""
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


@dataclass(frozen=True, slots=True)
class ConfidenceSettings:
    """How a run summarises token log-probabilities: the window of its group and tail
    confidence, and whether the per-token arrays are stored as well."""

    window: int
    keep_arrays: bool = False

    @classmethod
    def of(cls, sampling: SamplingConfig) -> ConfidenceSettings | None:
        """The run's settings (None: it asked for no log-probabilities)."""
        if sampling.logprobs is None:
            return None
        return cls(sampling.confidence_window or DEFAULT_WINDOW, sampling.keep_token_logprobs)

    def summarise(self, record: Rollout, sampled: list[float], tops: list[list[float]]) -> None:
        for name, value in trace_summary(sampled, tops, self.window).items():
            setattr(record, name, value)
        if self.keep_arrays:
            record.token_logprobs, record.top_logprobs = sampled, tops


def grade_generations(
    requests: Sequence[GenerationRequest],
    generations: Sequence[Sequence[Generation]],
    references: Mapping[str, Any],
    grader: Grader,
    contexts: Mapping[str, SampleContext] | None = None,
    truncation: Truncation = DEFAULT_TRUNCATION,
    unusable: Collection[str] = frozenset(),
    group: Callable[[list[Rollout]], None] | None = None,
    confidence: ConfidenceSettings | None = None,
) -> dict[str, list[Any]]:
    """Rollout rows (column -> values) for a chunk; failed generations become error rows.

    Each completion is split into reasoning and answer (`curate.core.reasoning`, the
    one split); the built-in graders read the answer only, a trainer's reward the text
    as the model wrote it. A rollout cut short (max_tokens, or reasoning never closed)
    is scored as `truncation` says. `contexts` (sample id -> row, see
    `sample_contexts`) reaches the graders that read it (verl, trl) through
    `curate.graders.base.grade`. Each error row says whether it recurs on a re-run
    (`curate.core.settled`): the backend's word for a failed generation; settled for a
    rollout cut short under the `error` policy and for a grader error on a sample in
    `unusable` (its reference failed the pre-run check); retryable otherwise. `group`,
    when given, grades the rollouts in place of `grader` (a grade that reads the
    rollout's siblings: `curate.evaluation.r3`). With `confidence`, a generation's token
    log-probabilities become its confidence summaries (`curate.stats.confidence`), and its
    arrays are kept when it says so."""
    if truncation not in TRUNCATION_POLICIES:  # the options were checked: a caller's bug
        raise ValueError(f"unknown truncation policy {truncation!r}")
    whole_text = sees_reasoning(grader)
    records: list[Rollout] = []
    to_grade: list[tuple[int, str]] = []  # (record index, the text the grader reads)
    for req, gens in zip(requests, generations, strict=True):
        for offset, gen in enumerate(gens):
            record = Rollout(
                sample_id=req.sample_id,
                rollout_idx=req.first_run + offset,
                error=gen.error,
                finish_reason=gen.finish_reason,
                truncated=gen.finish_reason == "length",
                prompt_tokens=gen.prompt_tokens,
                completion_tokens=gen.completion_tokens,
                latency_s=gen.latency_s,
                seed=req.seed if gen.seed is None else gen.seed,
                attempts=gen.attempts,
                token_count_source=gen.token_count_source,
            )
            records.append(record)
            if confidence is not None and gen.token_logprobs is not None:
                confidence.summarise(record, gen.token_logprobs, gen.top_logprobs or [])
            if gen.error is not None:
                record.settled = gen.settled
                continue
            if gen.text is None and gen.reasoning is None:
                record.error = "backend returned no text"
                record.settled = False
                continue
            if gen.reasoning is not None:
                split = separated(gen.text, gen.reasoning, bool(gen.reasoning_closed))
                raw = joined(split)
            else:
                split = split_reasoning(gen.text or "")
                raw = gen.text or ""
            split = at_last_token(split, gen.finish_reason)
            record.completion, record.reasoning = split.answer, split.reasoning
            record.reasoning_closed = split.closed
            record.truncated = cut_short(gen.finish_reason, split)
            if record.truncated and truncation == Truncation.WRONG:
                record.score = 0.0
            elif record.truncated and truncation == Truncation.ERROR:
                record.error = TRUNCATED_ERROR_PREFIX + (
                    "reasoning never closed"
                    if split.closed is False
                    else f"stopped at max_tokens ({gen.completion_tokens} tokens)"
                )
                record.settled = True  # the same seed cuts it short again
            elif whole_text:
                to_grade.append((len(records) - 1, raw))
            elif split.answer is None:
                record.score = 0.0  # reasoning that never ended gave no answer: wrong
            else:
                to_grade.append((len(records) - 1, split.answer))
    if to_grade and group is not None:
        group([records[i] for i, _ in to_grade])
        for i, _ in to_grade:
            if records[i].error is not None:
                records[i].settled = records[i].sample_id in unusable
    elif to_grade:
        # Graders are pure functions of (completion, reference): grade each distinct
        # pair once. Short answers repeat a lot across a sample's rollouts.
        pairs = [(text, records[i].sample_id) for i, text in to_grade]
        unique = list(dict.fromkeys(pairs))
        rows = None
        if contexts is not None and needs_context(grader):
            rows = [contexts.get(sid) or {} for _, sid in unique]
        results = grade(
            grader, [text for text, _ in unique], [references[sid] for _, sid in unique], rows
        )
        by_pair = dict(zip(unique, results, strict=True))
        for (i, _), pair in zip(to_grade, pairs, strict=True):
            res, record = by_pair[pair], records[i]
            record.extracted = res.extracted
            if res.error is not None:
                record.error = f"{GRADER_ERROR_PREFIX}{res.error}"
                record.settled = record.sample_id in unusable
            else:
                record.score = res.score
                record.raw_score = res.raw_score
    return rollout_columns(records)


def _cut(generations: Sequence[Sequence[Generation]], rollouts: int) -> int:
    """How many requests (from the start) hold at least `rollouts` rollouts; all of them
    when they hold fewer."""
    seen = 0
    for index, gens in enumerate(generations):
        seen += len(gens)
        if seen >= rollouts:
            return index + 1
    return len(generations)


def _generate(
    backend: Backend,
    requests: Sequence[GenerationRequest],
    sampling: SamplingConfig,
    mode: Mode,
    chunk_size: int,
    *,
    stream: bool = True,
) -> Iterator[tuple[Sequence[GenerationRequest], Sequence[Sequence[Generation]]]]:
    """Batches of (requests, their generations), ready to grade and store.

    A batch backend is called once per chunk. A streaming backend is consumed as
    results arrive and flushed every FLUSH_SECONDS (or chunk_size requests), so a
    killed run loses at most what was in flight. `stream=False` takes the batch path
    whatever the backend.
    """
    if stream and isinstance(backend, StreamingBackend):
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
    """Generate and grade every missing (sample_id, rollout_idx) with rollout_idx below the
    evaluation's run count (or per-sample target).

    `fields` are the Evaluation's own, for callers that spell them out
    (`run_eval(store, backend=..., grader=..., ...)`). `stored` is the store's
    de-duplicated rollouts (sample_id, rollout_idx, score, error) when the caller has just
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
        mine = existing.filter(pl.col("sample_id").is_in(list(prompts)))
        scored = mine.filter(pl.col("error").is_null())
        sids, rollout_idxs = scored["sample_id"].to_list(), scored["rollout_idx"].to_list()
        done = set(zip(sids, rollout_idxs, strict=True))
        # An error that recurs (curate.core.settled) is not retried: the same request
        # would fail the same way.
        if SETTLED_COLUMN not in mine.columns:
            mine = mine.with_columns(pl.lit(None, dtype=pl.Boolean).alias(SETTLED_COLUMN))
        kept = mine.filter(settled_error_expr())
        done |= set(zip(kept["sample_id"].to_list(), kept["rollout_idx"].to_list(), strict=True))
        tally.add_many(
            (s, v)
            for s, r, v in zip(sids, rollout_idxs, scored["score"].to_list(), strict=True)
            if r < target_runs(runs, s)
        )
    requests = plan_requests(prompts, runs, done, ev.seed)
    total = sum(target_runs(runs, sid) for sid in prompts)
    todo = sum(r.n for r in requests)
    result = EvalResult(skipped=total - todo)
    start = time.perf_counter()
    progress.start(total, total - todo, tally)

    # The trainer rewards read each sample's row: the one the run directory stores.
    contexts = sample_contexts(store.read_samples(), prompts) if needs_context(ev.grader) else None
    stage = _group_stage(store, ev, done)
    watch = GradingWatch(getattr(ev.grader, "name", type(ev.grader).__name__))
    forms = form_watch(ev.grader, ev.references, store)
    chunk_requests = 0  # requests seen towards the first full chunk (streaming flushes)

    def store_part(
        chunk: Sequence[GenerationRequest], generations: Sequence[Sequence[Generation]]
    ) -> list[str | None]:
        """Grade and write one shard; its `error` column."""
        cols = grade_generations(
            chunk,
            generations,
            ev.references,
            ev.grader,
            contexts,
            ev.truncation,
            ev.unusable_references,
            stage.grade if stage is not None else None,
            ConfidenceSettings.of(ev.sampling),
        )
        frame = pl.DataFrame(cols, schema_overrides={"rollout_idx": pl.Int32})
        store.append(frame)
        n = frame.height
        errors = [e for e in cols["error"] if e is not None]
        result.rollouts += n
        result.errors += len(errors)
        result.settled += sum(bool(s) for s in cols[SETTLED_COLUMN])
        result.error_messages.update(errors)
        result.truncated += sum(bool(t) for t in cols["truncated"])
        result.prompt_tokens += sum(t or 0 for t in cols["prompt_tokens"])
        result.completion_tokens += sum(t or 0 for t in cols["completion_tokens"])
        result.shards += 1
        tally.add_many(zip(cols["sample_id"], cols["score"], strict=True))
        progress.advance(n, len(errors), tally)
        forms.observe(cols["extracted"], cols["score"], cols["completion"])
        return list(cols["error"])

    def store_chunk(
        chunk: Sequence[GenerationRequest], generations: Sequence[Sequence[Generation]]
    ) -> None:
        nonlocal chunk_requests
        if watch.decided:
            store_part(chunk, generations)
            return
        # Until the watch has judged, a large chunk is graded in two parts: a grader
        # that fails (or times out) on everything costs WATCH_ROLLOUTS gradings, not
        # a whole chunk's.
        cut = _cut(generations, WATCH_ROLLOUTS - watch.graded)
        parts = [(chunk[:cut], generations[:cut]), (chunk[cut:], generations[cut:])]
        for index, (part, gens) in enumerate(parts):
            if not part:
                continue
            if watch.decided:
                store_part(part, gens)
                continue
            watch.observe(store_part(part, gens))
            chunk_requests += len(part)
            # A streaming backend flushes part-chunks: the first chunk is done once a
            # chunk's worth of requests (or all of them) has been stored.
            done = chunk_requests >= min(ev.chunk_size, len(requests))
            reason = watch.verdict(chunk_done=done)
            if reason is None and watch.decided:
                reason = forms.verdict()  # answers and references never the same form
            if reason is not None:
                left = sum(len(g) for _, later in parts[index + 1 :] for g in later)
                if left:
                    reason += f" ({left} rollouts generated after them were not graded)"
                raise RunError(reason)

    # A group grade prefills on the model that generates: never while the engine is
    # still generating (a streaming engine would hand the prefill its requests'
    # outputs), so such runs generate chunk by chunk and grade in between.
    batches = _generate(
        ev.backend, requests, ev.sampling, ev.mode, ev.chunk_size, stream=stage is None
    )
    try:
        if stage is not None:
            for chunk, generations in batches:
                store_chunk(chunk, generations)
        elif isinstance(ev.backend, StreamingBackend):
            # Results already arrive on the backend's own thread: store them in order.
            for chunk, generations in batches:
                store_chunk(chunk, generations)
        else:
            # Grade and write chunk k on a worker thread while the engine generates
            # chunk k+1; at most one chunk waits, so a crash loses at most two. Until
            # the grading watch has judged, chunks are stored before the next is
            # generated, so a broken grader stops the run one chunk in.
            pending: Future[None] | None = None
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="curate-store") as pool:
                for chunk, generations in batches:
                    if pending is not None:
                        pending.result()
                        pending = None
                    if watch.decided:
                        pending = pool.submit(store_chunk, chunk, generations)
                    else:
                        store_chunk(chunk, generations)
                if pending is not None:
                    pending.result()
    finally:
        progress.finish()
        result.seconds = time.perf_counter() - start
        if stage is not None:
            result.prefills = stage.prefilled
            result.prefill_tokens = stage.prefill_tokens
            result.prefill_seconds = stage.prefill_seconds
    return result


def _group_stage(store: RolloutStore, ev: Evaluation, done: set[tuple[str, int]]) -> R3Stage | None:
    """The stage that grades a group at once, for a grader that needs one (r3)."""
    if not is_group_prefill(ev.grader):
        return None
    return r3_stage(
        store.run_dir,
        ev.backend,
        ev.grader,  # type: ignore[arg-type]
        ev.prompts,
        ev.references,
        ev.mode,
        ev.runs,
        done,
        GRADER_ERROR_PREFIX,
    )
