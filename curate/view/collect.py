"""What the viewer shows of one run, read with the library calls behind the other
commands: `build_report` (the headline figures, as `curate report --format json` prints
them), `load_analysis` (per-sample statistics, as `curate plot` and `curate filter` compute
them), the suspect-label check, the stored rollouts, and the prompts and references rebuilt
from samples.parquet and the manifest as `curate grade` rebuilds them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.errors import InputError

if TYPE_CHECKING:
    import polars as pl

    from curate.core.prompts import Mode
    from curate.report.build import Report

# The rollout fields a sample's view shows, as stored (curate.core.rollout).
ROLLOUT_FIELDS = (
    "rollout_idx",
    "score",
    "raw_score",
    "error",
    "completion",
    "reasoning",
    "reasoning_closed",
    "extracted",
    "finish_reason",
    "truncated",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "attempts",
)


@dataclass
class RunData:
    """One run as the site needs it."""

    path: Path
    label: str
    report: Report
    report_json: dict[str, Any]  # `report_dict`: the JSON `curate report` prints
    per_sample: pl.DataFrame  # sample_id + the statistics columns, one row a sample
    rollouts: pl.DataFrame  # ROLLOUT_FIELDS present in the input, sorted
    manifest: dict[str, Any]
    prompts: dict[str, Any] = field(default_factory=dict)  # sample_id -> text or turns
    references: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # (graded, raw)
    suspects: set[str] = field(default_factory=set)
    suspects_checked: bool = False
    notes: list[str] = field(default_factory=list)


def collect_run(
    path: Path,
    label: str,
    *,
    threshold: float,
    group_size: int,
    group_by: str | None,
) -> RunData:
    """Read `path` (a run directory or score table) for the site."""
    import polars as pl

    from curate.analysis import load_analysis
    from curate.report.build import DEFAULT_GROUP_COLUMN, build_report
    from curate.report.render import report_dict

    # The report first: bad input fails here with the report's own one-line error.
    report = build_report(path, threshold=threshold, group_size=group_size, group_by=group_by)
    report_json = report_dict(
        report.summary,
        report.checks,
        source=report.source,
        usage=report.usage,
        suspects=report.suspects,
    )
    loaded = load_analysis(path, threshold=threshold, group_size=group_size)
    stats = loaded.per_sample.with_columns(pl.col("sample_id").cast(pl.String))
    column = group_by or DEFAULT_GROUP_COLUMN
    groups = loaded.source.group_labels(column)
    if groups is not None:
        stats = stats.join(groups, on="sample_id", how="left")
    else:
        stats = stats.with_columns(pl.lit(None, dtype=pl.String).alias("group"))
    rollouts, notes = _rollouts(path)
    if "truncated" in rollouts.columns:
        share = rollouts.group_by("sample_id").agg(
            pl.col("truncated").cast(pl.Float64).mean().alias("truncation")
        )
        stats = stats.join(share, on="sample_id", how="left")
    else:
        stats = stats.with_columns(pl.lit(None, dtype=pl.Float64).alias("truncation"))
    data = RunData(
        path=path,
        label=label,
        report=report,
        report_json=report_json,
        per_sample=stats.sort("sample_id"),
        rollouts=rollouts,
        manifest=loaded.manifest or {},
        notes=notes,
    )
    _suspects(data)
    _prompts_and_references(data, loaded.samples())
    return data


def _rollouts(path: Path) -> tuple[pl.DataFrame, list[str]]:
    """Every rollout with the fields the view shows (a run directory keeps them all; a
    score table its scores, errors and token counts only)."""
    import polars as pl

    from curate.store.run_dir import RolloutStore, is_run_dir
    from curate.store.scores import load_scores

    notes: list[str] = []
    if path.is_dir() and is_run_dir(path):
        frame = RolloutStore(path).rollouts()
    else:
        frame = load_scores(path).rollouts
        notes.append("a score table: no completions are stored, only scores and errors")
    keep = ["sample_id", *(c for c in ROLLOUT_FIELDS if c in frame.columns)]
    frame = frame.select(keep).with_columns(pl.col("sample_id").cast(pl.String))
    return frame.sort("sample_id", "rollout_idx"), notes


def _suspects(data: RunData) -> None:
    """The flagged sample ids: the report's check when it ran, else the same check run
    here (the report skips it unasked on large runs; the table's flag needs it)."""
    from curate.analysis.suspects import load_suspects
    from curate.stats.suspects import DEFAULT_MIN_N, DEFAULT_MIN_SHARE
    from curate.store.scores import has_answers

    check = data.report.suspects
    if check is None or not check.checked:
        if not has_answers(data.path):
            return
        check = load_suspects(
            data.path,
            min_n=check.min_n if check is not None else DEFAULT_MIN_N,
            min_share=check.min_share if check is not None else DEFAULT_MIN_SHARE,
            manifest=data.manifest,
        )
    data.suspects = set(check.ids().cast(str).to_list()) if check.checked else set()
    data.suspects_checked = check.checked


def _prompts_and_references(data: RunData, samples: pl.DataFrame | None) -> None:
    """Each sample's prompt as `curate eval` built it, and its reference as graded
    (extracted as the run's manifest says) beside the stored one."""
    from curate.data.samples import build_prompts, fields_of_manifest, references_by_id
    from curate.graders.references import extract_mode_of_manifest, extract_references

    if samples is None:
        if data.path.is_dir():
            data.notes.append("no samples.parquet: prompts and references are not shown")
        return
    manifest = data.manifest
    try:
        fields = fields_of_manifest(manifest, data.path / "manifest.json")
    except InputError as exc:
        data.notes.append(f"prompts and references are not shown: {exc}")
        return
    if fields.prompt_field is None and fields.messages_field is None and fields.template is None:
        data.notes.append("the manifest names no prompt field: prompts are not shown")
    samples = samples.with_columns(samples["sample_id"].cast(str))
    mode: Mode = "completion" if manifest.get("mode") == "completion" else "chat"
    try:
        raw = references_by_id(samples, fields)
        if fields.prompt_field or fields.messages_field or fields.template:
            prompts = build_prompts(samples, fields, mode, system=manifest.get("system"))
            data.prompts = dict(zip(samples["sample_id"].to_list(), prompts, strict=True))
    except InputError as exc:
        data.notes.append(f"prompts are not shown: {exc}")
        return
    graded = extract_references(raw, extract_mode_of_manifest(manifest)).references
    data.references = {sid: (graded.get(sid), value) for sid, value in raw.items()}


def as_text(value: Any) -> str | None:
    """A prompt part or reference as a person reads it: text as is, else JSON."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
