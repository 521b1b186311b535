"""`curate grade RUN --grader G --out RUN2`: the stored completions of a run scored again
by another grader, into a new run directory, without starting any model.

The new run has the same samples and the same rollouts (completion, seed, tokens,
finish reason, latency, attempts); only `score`, `error`, `extracted` and `raw_score`
are new. A rollout whose generation failed stays that error row; a rollout the old
grader failed on is graded again (its completion is there). The manifest is the
source's with the new grader, and `regraded_from` naming the source run and its grader.

The new directory appears whole or not at all: it is built in `.NAME.partial` beside
it and renamed into place. A failed re-grade leaves only that directory's judge cache
(paid judgements), which the next attempt reuses; an earlier re-grade's cache at OUT
is carried over too.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.prompts import Mode
from curate.core.settled import SETTLED_COLUMN
from curate.data.samples import build_prompts, fields_of_manifest, references_by_id
from curate.errors import InputError, UsageError
from curate.evaluation.runner import GRADER_ERROR_PREFIX, sample_contexts
from curate.graders import get_grader
from curate.graders.base import grade, needs_context
from curate.graders.judge import (
    CACHE_FILE,
    JudgeConfig,
    judge_settings_of,
    judge_usage_of,
)
from curate.graders.references import extract_mode_of_manifest, extract_references
from curate.store.run_dir import RolloutStore

if TYPE_CHECKING:
    import polars as pl

    from curate.graders.reward_model import RewardModelConfig

# Rollouts graded per stored shard.
CHUNK_ROLLOUTS = 4096
# What a re-grade replaces; every other column is copied as stored.
NEW_COLUMNS = ("score", "error", "extracted", "raw_score")


@dataclass
class RegradeOptions:
    source: Path
    out: Path
    grader: str
    grader_timeout: float = 10.0
    score_range: tuple[float, float] | None = None
    judge: JudgeConfig | None = None
    force: bool = False  # replace an existing OUT that is another run
    workers: int | None = None  # graders' worker processes (math, python:, code, ...)
    reward_model: RewardModelConfig | None = None  # `reward-model`'s server


@dataclass
class RegradeResult:
    out: Path
    rollouts: int = 0  # all rollouts copied
    graded: int = 0  # rollouts that had a completion and were graded again
    generation_errors: int = 0  # kept as they were
    grader_errors: int = 0  # the new grader's error rows
    seconds: float = 0.0
    judge_usage: dict[str, Any] | None = None
    error_messages: dict[str, int] = field(default_factory=dict)


def partial_dir(out: Path) -> Path:
    return out.parent / f".{out.name}.partial"


def check_target(opts: RegradeOptions) -> None:
    """UsageError when OUT may not be written: the source itself, a file, or another
    run (not a re-grade of this source with this grader) without --force."""
    src, out = opts.source.resolve(), opts.out.resolve()
    if src == out:
        raise UsageError(f"--out {opts.out}: is the source run; choose a new directory")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {opts.out}: exists and is not a directory")
    if not out.exists() or not any(out.iterdir()) or opts.force:
        return
    previous = RolloutStore(out).previous_manifest() if (out / "manifest.json").is_file() else None
    origin = (previous or {}).get("regraded_from") or {}
    same_source = origin.get("run") == str(src) and previous is not None
    if same_source and (previous or {}).get("grader") == opts.grader.strip():
        return  # the same re-grade again: rewritten (the judge's cache makes it cheap)
    raise UsageError(
        f"--out {opts.out}: already holds another run; choose a new directory or pass "
        "--force to replace it"
    )


def _source(opts: RegradeOptions) -> tuple[RolloutStore, dict[str, Any], pl.DataFrame]:
    store = RolloutStore(opts.source)
    if opts.source.is_file():
        raise InputError(
            "a score table holds no completions: re-grading needs a run directory from "
            "`curate eval`",
            path=opts.source,
        )
    if not opts.source.is_dir():
        raise InputError("no such run directory", path=opts.source)
    if not store.exists():
        raise InputError(
            "not a run directory (no manifest.json): re-grading needs the stored "
            "completions of a `curate eval` run",
            path=opts.source,
        )
    manifest = store.read_manifest()
    samples = store.read_samples()
    if samples is None:
        raise InputError("the run has no samples.parquet", path=opts.source)
    return store, manifest, samples


def regrade(opts: RegradeOptions, *, say: Any = None) -> RegradeResult:
    """Grade the source run's completions with `opts.grader` into `opts.out`."""
    started = time.perf_counter()
    store, manifest, samples = _source(opts)  # a bad source before a bad target
    check_target(opts)
    fields = fields_of_manifest(manifest, store.manifest_path)
    raw = references_by_id(samples, fields)
    references = extract_references(raw, extract_mode_of_manifest(manifest)).references
    rollouts = store.rollouts() if store.shard_paths() else None
    if rollouts is None or rollouts.height == 0:
        raise InputError("the run has no rollouts to grade", path=opts.source)

    partial = partial_dir(opts.out)
    judge = opts.judge
    if judge is not None:
        judge = replace(judge, cache_path=partial / CACHE_FILE)
    prepare_partial(partial, opts.out)
    try:
        grader = get_grader(
            opts.grader,
            timeout_s=opts.grader_timeout,
            score_range=opts.score_range,
            workers=opts.workers,
            reward_model=opts.reward_model,
            judge=judge,
        )
    except BaseException:
        abandon_build(partial)
        raise
    result = RegradeResult(out=opts.out)
    try:
        contexts = None
        if needs_context(grader):
            mode: Mode = "completion" if manifest.get("mode") == "completion" else "chat"
            prompts = dict(
                zip(
                    samples["sample_id"].to_list(),
                    build_prompts(
                        samples, fields, mode, system=manifest.get("system"), source=opts.source
                    ),
                    strict=True,
                )
            )
            contexts = sample_contexts(samples, prompts)
        target = RolloutStore(partial)
        target.create()
        target.write_samples(samples)
        errors: dict[str, int] = {}
        for offset in range(0, rollouts.height, CHUNK_ROLLOUTS):
            chunk = rollouts.slice(offset, CHUNK_ROLLOUTS)
            graded = grade_chunk(chunk, grader, references, contexts, result)
            for message in graded["error"].drop_nulls().to_list():
                errors[message] = errors.get(message, 0) + 1
            target.append(graded)
            if say is not None:
                say(f"grade: {min(offset + CHUNK_ROLLOUTS, rollouts.height)}/{rollouts.height}")
        result.error_messages = errors
        result.judge_usage = judge_usage_of(grader)
        target.write_manifest(_manifest(manifest, opts, grader, result))
    except BaseException:
        abandon_build(partial)
        raise
    finally:
        grader.close()
    swap_in(partial, opts.out)
    result.seconds = time.perf_counter() - started
    return result


def grade_chunk(
    chunk: pl.DataFrame,
    grader: Any,
    references: dict[str, object],
    contexts: dict[str, Any] | None,
    result: RegradeResult,
) -> pl.DataFrame:
    """`chunk` with the new grader's score, error, extracted and raw_score."""
    import polars as pl

    completions = chunk["completion"].to_list()
    old_errors = chunk["error"].to_list()
    sids = chunk["sample_id"].to_list()
    n = chunk.height
    score: list[float | None] = [None] * n
    error: list[str | None] = list(old_errors)
    # A regraded row's old flag no longer applies: scored (null), or a grader error the
    # new grader may not repeat on a re-run (retryable); kept rows keep theirs.
    settled: list[bool | None] = list(chunk[SETTLED_COLUMN].to_list())
    extracted: list[str | None] = [None] * n
    raw: list[float | None] = [None] * n
    todo = [
        i
        for i in range(n)
        if completions[i] is not None
        and (old_errors[i] is None or old_errors[i].startswith(GRADER_ERROR_PREFIX))
    ]
    result.rollouts += n
    result.generation_errors += n - len(todo)
    if todo:
        # Grade each distinct (completion, sample) once, as the engine does.
        pairs = [(completions[i], sids[i]) for i in todo]
        unique = list(dict.fromkeys(pairs))
        missing = [sid for _, sid in unique if sid not in references]
        if missing:
            raise InputError(f"rollouts of sample {missing[0]!r} have no sample row")
        rows = [(contexts or {}).get(sid) or {} for _, sid in unique] if contexts else None
        graded = grade(
            grader, [text for text, _ in unique], [references[sid] for _, sid in unique], rows
        )
        by_pair = dict(zip(unique, graded, strict=True))
        for i, pair in zip(todo, pairs, strict=True):
            res = by_pair[pair]
            extracted[i] = res.extracted
            raw[i] = res.raw_score
            if res.error is not None:
                error[i] = f"{GRADER_ERROR_PREFIX}{res.error}"
                settled[i] = False
                result.grader_errors += 1
            else:
                error[i] = None
                settled[i] = None
                score[i] = res.score
        result.graded += len(todo)
    return chunk.with_columns(
        pl.Series("score", score, dtype=pl.Float64),
        pl.Series("error", error, dtype=pl.String),
        pl.Series("extracted", extracted, dtype=pl.String),
        pl.Series("raw_score", raw, dtype=pl.Float64),
        pl.Series(SETTLED_COLUMN, settled, dtype=pl.Boolean),
    )


def _manifest(
    source: dict[str, Any], opts: RegradeOptions, grader: Any, result: RegradeResult
) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    body = {
        k: v
        for k, v in source.items()
        if k not in ("format_version", "judge", "judge_options", "judge_usage", "reference_check")
    }
    body.update(
        grader=opts.grader.strip(),
        grader_reason=f"{opts.grader.strip()} (re-graded with `curate grade`)",
        grader_timeout_s=opts.grader_timeout,
        score_range=list(opts.score_range) if opts.score_range is not None else None,
        created_at=now,
        updated_at=now,
        regraded_from={
            "run": str(opts.source.resolve()),
            "grader": source.get("grader"),
            "score_range": source.get("score_range"),
            "judge": source.get("judge"),
            "rollouts": result.rollouts,
            "graded": result.graded,
        },
        **judge_settings_of(grader),
    )
    if result.judge_usage is not None:
        body["judge_usage"] = result.judge_usage
    return body


def prepare_partial(partial: Path, out: Path) -> None:
    """An empty build directory, keeping a failed attempt's judge cache (paid calls) and
    taking an earlier re-grade's at OUT."""
    cache = partial / CACHE_FILE
    kept = cache.read_bytes() if cache.is_file() else b""
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    earlier = out / CACHE_FILE
    data = earlier.read_bytes() if earlier.is_file() else b""
    if kept:
        data += (b"\n" if data and not data.endswith(b"\n") else b"") + kept
    if data:
        cache.write_bytes(data)


def abandon_build(partial: Path) -> None:
    """Remove a failed build, all but its judge cache (and the directory when that is
    all there was)."""
    if not partial.is_dir():
        return
    for path in partial.iterdir():
        if path.name == CACHE_FILE:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if not any(partial.iterdir()):
        partial.rmdir()


def swap_in(partial: Path, out: Path) -> None:
    """Rename the finished build to OUT (an existing OUT, already allowed, is replaced)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.replaced"
        if old.exists():
            shutil.rmtree(old)
        out.rename(old)
    partial.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
