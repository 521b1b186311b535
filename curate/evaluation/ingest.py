"""`ingest`: a trainer's rollout files as run directories, one per step (or step range),
so `report`, `compare`, `plot` and `filter` read them like runs of `curate eval`.

The rollouts of a step are matched to the curated data set's samples by prompt text
(`curate.trainers.match`); within a step a sample's rollouts are numbered in file order
(rollout_idx 0, 1, ...). Scores are the trainer's own, in [0, 1] or mapped onto it from
`score_range`; the raw value is kept in `raw_score`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from curate import __version__
from curate.data.samples import build_prompts, file_sha256, load_samples
from curate.errors import InputError, UsageError
from curate.store.atomic import atomic_dir, atomic_write_text
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.trainers.dumps import FORMATS, DumpFile, detect_format, message_text
from curate.trainers.match import MatchResult, PromptMatcher

if TYPE_CHECKING:
    from curate.graders.base import ScoreRange

INGEST_FILE = "ingest.json"


@dataclass
class IngestedRun:
    """One run directory written by `ingest`."""

    path: str
    first_step: int
    last_step: int
    rollouts: int
    samples: int
    max_rollouts_per_sample: int
    unmatched_rollouts: int
    ambiguous_rollouts: int


@dataclass
class IngestResult:
    format: str
    score_field: str
    runs: list[IngestedRun] = field(default_factory=list)
    matched_by: dict[str, int] = field(default_factory=dict)
    unmatched_prompts: int = 0
    ambiguous_prompts: int = 0
    unmatched_examples: list[str] = field(default_factory=list)

    @property
    def rollouts(self) -> int:
        return sum(r.rollouts for r in self.runs)

    @property
    def unmatched_rollouts(self) -> int:
        return sum(r.unmatched_rollouts for r in self.runs)

    @property
    def ambiguous_rollouts(self) -> int:
        return sum(r.ambiguous_rollouts for r in self.runs)

    @property
    def read_rollouts(self) -> int:
        """Every rollout read: matched, unmatched and ambiguous."""
        return self.rollouts + self.unmatched_rollouts + self.ambiguous_rollouts


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """'A:B' (inclusive), 'A:' or ':B' or 'A' -> (first, last)."""
    if text is None:
        return None
    first, sep, last = text.partition(":")
    try:
        lo = int(first) if first.strip() else 0
        hi = int(last) if sep and last.strip() else (lo if not sep else 2**62)
    except ValueError:
        raise UsageError(f"--steps {text!r}: expected A:B, A: or :B (step numbers)") from None
    if lo > hi or lo < 0:
        raise UsageError(
            f"--steps {text!r}: the first step must be 0 or more and not after the last"
        )
    return lo, hi


def ingest(
    source: str | os.PathLike[str],
    data: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    format: str | None = None,
    score_field: str | None = None,
    score_range: ScoreRange | None = None,
    steps: tuple[int, int] | None = None,
    steps_per_run: int = 1,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    template: str | None = None,
    model: str | None = None,
    force: bool = False,
    layout: str | None = "auto",
) -> IngestResult:
    """Write one run directory per step (`steps_per_run` steps each) under `out`."""

    source, out = Path(source), Path(out)
    if steps_per_run < 1:
        raise UsageError("--steps-per-run must be at least 1")
    name = format or detect_format(source)
    if name not in FORMATS:
        raise UsageError(f"--format {name!r}: unknown; choose from {', '.join(FORMATS)}")
    dump_format = FORMATS[name]
    files = [f for f in dump_format.find(source) if steps is None or steps[0] <= f.step <= steps[1]]
    if not files:
        raise InputError(
            f"no {dump_format.title} found" + (" in --steps" if steps else ""), path=source
        )
    samples, fields = load_samples(
        data,
        prompt_field=prompt_field,
        answer_field=answer_field,
        id_field=id_field,
        template=template,
        layout=layout,  # as `curate eval` reads it, so the prompts the trainer saw match
    )
    prompts = build_prompts(samples, fields, "chat", source=data)
    texts = {
        sid: message_text(prompt, "user") or ""
        for sid, prompt in zip(samples["sample_id"].to_list(), prompts, strict=True)
    }
    matcher = PromptMatcher(texts)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a directory", path=out)
    groups = _group_files(files, steps_per_run)
    targets = [out / _run_name(group) for group in groups]
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        raise InputError(
            "run directory exists (ingested before?); use --force to replace it", path=existing[0]
        )
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".ingest-", dir=out))
    try:
        result = _ingest_groups(
            dump_format,
            groups,
            staging,
            matcher,
            samples,
            fields,
            data,
            source,
            score_field=score_field,
            score_range=score_range,
            model=model,
        )
        # Every step read and written: only now do the runs replace anything.
        for staged, target in zip(sorted(staging.iterdir()), targets, strict=True):
            with atomic_dir(target, may_replace=lambda p: force and is_run_dir(p)) as tmp:
                tmp.rmdir()
                os.replace(staged, tmp)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for run, target in zip(result.runs, targets, strict=True):
        run.path = str(target)
    _write_index(out, result)
    return result


def _ingest_groups(
    dump_format: Any,
    groups: list[list[DumpFile]],
    staging: Path,
    matcher: PromptMatcher,
    samples: pl.DataFrame,
    fields: Any,
    data: str | os.PathLike[str],
    source: Path,
    *,
    score_field: str | None,
    score_range: ScoreRange | None,
    model: str | None,
) -> IngestResult:
    name = dump_format.name
    result: IngestResult | None = None
    dataset_sha256 = file_sha256(data)  # once: every run's manifest names the same file
    for index, group in enumerate(groups):
        frames = []
        for file in group:
            frame, column = dump_format.read(file, score_field)
            frames.append(frame)
            if result is None:
                result = IngestResult(format=name, score_field=column)
            elif column != result.score_field:
                raise InputError(
                    f"steps disagree on the score column ({result.score_field}, {column})",
                    path=file.path,
                )
        assert result is not None
        dump = pl.concat(frames)
        matched = matcher.match(dump["prompt"].fill_null("").to_list())
        _merge_counts(result, matched)
        rollouts, run = _rollouts(dump, matched, score_range, source)
        run_samples = samples.filter(
            pl.col("sample_id").is_in(rollouts["sample_id"].unique().implode())
        )
        manifest = _manifest(
            name,
            result.score_field,
            group,
            data,
            dataset_sha256,
            fields,
            model,
            score_range,
            run,
            matched,
        )
        _write_run(staging / f"{index:08d}", run_samples, rollouts, manifest)
        result.runs.append(run)
    assert result is not None
    if not result.rollouts:
        raise InputError(
            f"no prompt matched a sample of {data} (e.g. {result.unmatched_examples[:1]}); "
            "check --prompt-field / --template",
            path=source,
        )
    return result


def _group_files(files: list[DumpFile], per_run: int) -> list[list[DumpFile]]:
    return [files[i : i + per_run] for i in range(0, len(files), per_run)]


def _run_name(group: list[DumpFile]) -> str:
    first, last = group[0].step, group[-1].step
    return f"step-{first:06d}" if first == last else f"steps-{first:06d}-{last:06d}"


def _merge_counts(result: IngestResult, matched: MatchResult) -> None:
    for method, count in matched.by_method.items():
        result.matched_by[method] = result.matched_by.get(method, 0) + count
    result.unmatched_prompts += len(matched.unmatched)
    result.ambiguous_prompts += len(matched.ambiguous)
    room = 3 - len(result.unmatched_examples)
    if room > 0:
        result.unmatched_examples += [t[:120] for t in matched.unmatched[:room]]


def _rollouts(
    dump: pl.DataFrame, matched: MatchResult, score_range: ScoreRange | None, source: Path
) -> tuple[pl.DataFrame, IngestedRun]:
    ids = pl.DataFrame(
        {"prompt": list(matched.ids), "sample_id": list(matched.ids.values())},
        schema={"prompt": pl.String, "sample_id": pl.String},
    )
    ambiguous = set(matched.ambiguous)
    joined = dump.with_row_index("__order").join(ids, on="prompt", how="left")
    unmatched_rows = joined.filter(pl.col("sample_id").is_null())
    n_ambiguous = int(unmatched_rows["prompt"].is_in(list(ambiguous)).sum()) if ambiguous else 0
    rows = joined.filter(pl.col("sample_id").is_not_null()).sort("__order")
    raw = rows["score"]
    if raw.null_count():
        first = rows.filter(pl.col("score").is_null()).row(0, named=True)
        raise InputError(f"{first['file']}: line {first['line']}: the score is missing")
    scores = _normalised(raw, score_range, rows)
    rollouts = pl.DataFrame(
        {
            "sample_id": rows["sample_id"],
            "rollout_idx": rows.select(pl.int_range(pl.len()).over("sample_id"))
            .to_series()
            .cast(pl.Int32),
            "score": scores,
            "completion": rows["completion"],
            "raw_score": raw
            if score_range is not None
            else pl.Series([None] * rows.height, dtype=pl.Float64),
        }
    )
    per_sample = rollouts.group_by("sample_id").len()
    steps = dump["step"]
    run = IngestedRun(
        path="",
        first_step=int(steps.min()),  # type: ignore[arg-type]
        last_step=int(steps.max()),  # type: ignore[arg-type]
        rollouts=rollouts.height,
        samples=per_sample.height,
        max_rollouts_per_sample=int(per_sample["len"].max() or 0),  # type: ignore[arg-type]
        unmatched_rollouts=unmatched_rows.height - n_ambiguous,
        ambiguous_rollouts=n_ambiguous,
    )
    return rollouts, run


def _normalised(raw: pl.Series, score_range: ScoreRange | None, rows: pl.DataFrame) -> pl.Series:
    values = raw.to_list()
    if score_range is None:
        bad = next((i for i, v in enumerate(values) if not (0.0 <= v <= 1.0)), None)
        if bad is not None:
            row = rows.row(bad, named=True)
            raise InputError(
                f"line {row['line']}: score {values[bad]!r} is outside [0, 1]; give the trainer's "
                "reward range with --score-range LO:HI (for example -1:1)",
                path=row["file"],
            )
        return raw.cast(pl.Float64)
    out = []
    for i, v in enumerate(values):
        if not (math.isfinite(v) and score_range.low <= v <= score_range.high):
            row = rows.row(i, named=True)
            raise InputError(
                f"line {row['line']}: score {v!r} is outside --score-range {score_range}",
                path=row["file"],
            )
        out.append(min(1.0, max(0.0, score_range.normalise(v))))
    return pl.Series(out, dtype=pl.Float64)


def _manifest(
    fmt: str,
    column: str,
    group: list[DumpFile],
    data: str | os.PathLike[str],
    dataset_sha256: str,
    fields: Any,
    model: str | None,
    score_range: ScoreRange | None,
    run: IngestedRun,
    matched: MatchResult,
) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    steps = (
        f"step {run.first_step}"
        if run.first_step == run.last_step
        else (f"steps {run.first_step}-{run.last_step}")
    )
    return {
        "backend": f"ingest:{fmt}",
        "model": model or f"{fmt} policy at {steps}",
        "runs": run.max_rollouts_per_sample,
        "adaptive": False,
        "mode": "chat",
        "system": None,
        "dataset_path": str(data),
        "dataset_sha256": dataset_sha256,
        "prompt_field": fields.prompt_field,
        "messages_field": fields.messages_field,
        "answer_field": fields.answer_field,
        "id_field": fields.id_field,
        "template": fields.template,
        "layout": fields.layout,
        "grader": f"{fmt}:{column}",
        "grader_reason": f"the trainer's own reward ({column!r} of its rollout files)",
        "score_range": [score_range.low, score_range.high] if score_range is not None else None,
        "sampling": {},
        "engine_options": {},
        "curate_version": __version__,
        "created_at": now,
        "updated_at": now,
        "ingested": {
            "format": fmt,
            "files": [str(f.path) for f in group],
            "first_step": run.first_step,
            "last_step": run.last_step,
            "score_field": column,
            "rollouts": run.rollouts,
            "unmatched_rollouts": run.unmatched_rollouts,
            "ambiguous_rollouts": run.ambiguous_rollouts,
            "matched_by": dict(matched.by_method),
            "template_wrapping": list(matched.wrapping) if matched.wrapping else None,
        },
    }


def _write_run(
    target: Path, samples: pl.DataFrame, rollouts: pl.DataFrame, manifest: dict[str, Any]
) -> None:
    store = RolloutStore(target)
    store.create()
    store.write_samples(samples)
    store.append(rollouts)
    store.write_manifest(manifest)


def _write_index(out: Path, result: IngestResult) -> None:
    body = {
        "format": result.format,
        "score_field": result.score_field,
        "matched_by": result.matched_by,
        "unmatched_prompts": result.unmatched_prompts,
        "ambiguous_prompts": result.ambiguous_prompts,
        "rollouts_read": result.read_rollouts,
        "rollouts_matched": result.rollouts,
        "unmatched_rollouts": result.unmatched_rollouts,
        "ambiguous_rollouts": result.ambiguous_rollouts,
        "runs": [run.__dict__ for run in result.runs],
    }
    atomic_write_text(out / INGEST_FILE, json.dumps(body, indent=2) + "\n")
