"""`filter_run`: write the learnable subset of a run in a training format, and the
rejects beside it with a drop_reason (the library call behind `curate filter`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.outcome import DEFAULT_THRESHOLD
from curate.filtering.select import FilterSpec, parse_keep, parse_range, parse_suspects
from curate.stats.per_sample import DEFAULT_GROUP_SIZE

if TYPE_CHECKING:
    import polars as pl

_TABLE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq")


def rejects_path(output: str | os.PathLike[str]) -> Path:
    """OUT.jsonl -> OUT.rejects.jsonl, beside the output (OUT -> OUT.rejects.jsonl)."""
    output = Path(output)
    if output.suffix.lower() not in _TABLE_SUFFIXES:
        return output.with_name(f"{output.name}.rejects.jsonl")
    return output.with_name(f"{output.stem}.rejects{output.suffix}")


@dataclass
class FilterResult:
    """What `filter_run` wrote, and what `curate filter` reports about it."""

    format: str
    paths: list[Path]  # the kept samples' files
    rejects: Path
    kept: int
    total: int  # samples matched to a row of the samples file (all, for a bare table)
    scored: int  # samples in the scores
    drop_reasons: list[tuple[str, int]] = field(default_factory=list)  # most common first
    notes: list[str] = field(default_factory=list)
    weights_filled: int = 0  # kept samples a weight table lacked, given `weight_default`
    plan_total: int | None = None  # rollouts in the whole plan, when one was joined
    plan_kept: int = 0  # of those, planned for the kept samples
    plan_missing: int = 0  # kept samples the plan does not list (planned_rollouts null)
    suspects: int | None = None  # suspect labels found, when --suspects asked for them

    @property
    def dropped(self) -> int:
        return self.total - self.kept

    @property
    def unmatched(self) -> int:
        """Scored samples with no matching row in the samples file."""
        return self.scored - self.total


def filter_run(
    run: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    keep: Sequence[str] = ("high-variance",),
    pass_rate: str | tuple[float, float] | None = None,
    data: str | os.PathLike[str] | None = None,
    split: str | None = None,
    id_field: str | None = None,
    format: str | None = None,
    stats: bool = True,
    weights: str | os.PathLike[str] | None = None,
    weight_delta: float = 0.05,
    weight_default: float | None = None,
    plan: str | os.PathLike[str] | None = None,
    weight_column: str = "weight",
    data_source: str | None = None,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    template: str | None = None,
    system: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    suspects: str = "keep",
) -> FilterResult:
    """Keep the samples of `run` whose category is in `keep` (the names `curate filter
    --keep` takes) and whose pass rate is within `pass_rate` ("LO:HI" or (lo, hi); on
    an adaptive run the posterior mean, as the stopping rule biases raw rates); write
    them to `output` in `format` (default: from the suffix) and the rest to
    `rejects_path(output)`, all files or none.

    `data` gives the original samples of a bare score table (`split`, `id_field` pick
    them out); `weights` is an objective (linear|log|sqrt|arcsin|std) or a table of
    sample_id, weight that must cover every kept sample, unless `weight_default` fills
    the ones it lacks; `plan` is a plan from `plan_rollouts`. `suspects` (keep, drop,
    only) drops the suspect labels (`curate.analysis.suspects`; drop_reason
    "suspect_label") or every other sample; it needs extracted answers. Bad options
    fail before the scores are read.
    """
    from contextlib import ExitStack
    from dataclasses import replace

    import polars as pl

    from curate.allocation import join_plan
    from curate.analysis import load_analysis
    from curate.data.sources import read_source
    from curate.errors import UsageError
    from curate.exports import (
        default_data_source,
        export_fields,
        format_for_output,
        get_format,
        prepare_batch,
        write_export,
    )
    from curate.filtering.select import attach_fields, decide
    from curate.filtering.weights import check_weight_default, table_weights
    from curate.stats.weights import STD, WEIGHT_KINDS, check_objective, weight_table
    from curate.store.atomic import atomic_path
    from curate.store.tables import read_table

    run, output = Path(run), Path(output)
    data = Path(data) if data is not None else None
    # Output and option checks come first: a bad name costs no reading.
    fmt = get_format(format) if format is not None else format_for_output(output)
    fmt.check_output(output)
    if isinstance(pass_rate, str):
        pass_rate = parse_range(pass_rate) if pass_rate else None
    spec = FilterSpec(
        keep=parse_keep(list(keep)), pass_rate=pass_rate, suspects=parse_suspects(suspects)
    )
    if spec.suspects != "keep":
        _check_answers(run, spec.suspects)
    if split is not None and data is None:
        # A run directory keeps the samples it evaluated: only --data has splits to pick.
        raise UsageError("--split picks a split of --data; pass --data too")
    loaded = load_analysis(run, threshold=threshold, group_size=group_size)
    # The same reader (and split rules) as `curate eval`, so --split means the same there.
    samples = read_source(data, split=split) if data is not None else loaded.samples()
    if fmt.needs_prompts and samples is None:
        raise UsageError(
            f"--format {fmt.name} needs each sample's prompt and answer: filter a run "
            "directory from `curate eval`, or pass the original samples with --data"
        )
    # `weights` names an objective (computed below, on the kept samples) or a file.
    name = str(weights) if weights is not None else None
    objective = name if name in WEIGHT_KINDS and not Path(name).exists() else None
    if objective is not None:
        check_objective(objective, weight_delta)
    weights_path = Path(weights) if weights is not None and objective is None else None
    if weights_path is not None and not weights_path.exists() and not weights_path.suffix:
        # Not a file and not a table's name either: most likely a mistyped objective.
        raise UsageError(
            f"--weights '{weights}' is neither an objective ({', '.join(WEIGHT_KINDS)}) "
            "nor a weight table file"
        )
    check_weight_default(weight_default, table=weights_path is not None, given=weights is not None)
    weight_frame = read_table(weights_path) if weights_path is not None else None
    plan_path = Path(plan) if plan is not None else None
    plan_frame = read_table(plan_path) if plan_path is not None else None
    if id_field is None:
        id_field = "sample_id" if samples is None or "sample_id" in samples.columns else "id"
    if (loaded.manifest or {}).get("adaptive"):
        spec = replace(spec, rate_column="smoothed_pass_rate")  # issue 13
    per_sample, flagged = loaded.per_sample, None
    if spec.suspects != "keep":
        per_sample, flagged = _with_suspect_labels(per_sample, run, spec.suspects, loaded.manifest)
    decisions = decide(per_sample, spec)
    rows = attach_fields(decisions, samples, id_field=id_field, source=data or run)
    kept = rows.filter(pl.col("kept")).drop("kept", "drop_reason")
    dropped = rows.filter(~pl.col("kept")).drop("kept")
    filled = 0
    if objective is not None:
        # `std` reads the per-sample statistics, which the export rows do not carry.
        source = decisions.filter(pl.col("kept")) if objective == STD else kept
        weight_frame = weight_table(source, objective, weight_delta)
    elif weight_frame is not None:
        checked = table_weights(
            weight_frame,
            kept["sample_id"].cast(pl.String).to_list(),
            default=weight_default,
            source=weights_path,
        )
        weight_frame, filled = checked.frame, checked.filled
    plan_total = None
    if plan_frame is not None:
        kept = join_plan(kept, plan_frame, source=plan_path)
        plan_total = int(plan_frame["planned_rollouts"].cast(pl.Int64).sum())

    manifest = loaded.manifest or {}
    origin = data or run
    fields = None
    if fmt.needs_prompts and samples is not None:
        fields = export_fields(
            samples,
            manifest=None if data is not None else manifest,
            prompt_field=prompt_field,
            answer_field=answer_field,
            template=template,
            source=origin,
        )
    batch = prepare_batch(
        kept,
        fields=fields,
        mode="completion" if manifest.get("mode") == "completion" else "chat",
        system=system if system is not None else manifest.get("system"),
        data_source=data_source,
        default_source=default_data_source(manifest, data),
        stats=stats,
        weights=weight_frame,
        weight_column=weight_column,
        source=weights_path or origin,
    )
    if plan_frame is not None:  # every format carries the plan, like a statistic
        batch = replace(batch, stat_columns=(*batch.stat_columns, "planned_rollouts"))
    rejects = rejects_path(output)
    # Every output file and the rejects appear together or not at all.
    with ExitStack() as stack:
        written = write_export(fmt, batch, output, stack=stack)
        write_rejects(dropped, stack.enter_context(atomic_path(rejects)), rejects)
    reasons = dropped.group_by("drop_reason").len().sort("len", descending=True)
    return FilterResult(
        format=fmt.name,
        paths=list(written.paths),
        rejects=rejects,
        kept=kept.height,
        total=rows.height,
        scored=loaded.per_sample.height,
        drop_reasons=[(str(reason), int(count)) for reason, count in reasons.rows()],
        notes=list(written.notes),
        weights_filled=filled,
        plan_total=plan_total,
        plan_kept=int(kept["planned_rollouts"].sum()) if plan_total is not None else 0,
        plan_missing=kept["planned_rollouts"].null_count() if plan_total is not None else 0,
        suspects=flagged,
    )


def write_rejects(frame: pl.DataFrame, tmp: Path, final: Path) -> None:
    """The rejects in the format the final name asks for (Parquet, else JSON Lines)."""
    if final.suffix.lower() in (".parquet", ".pq"):
        frame.write_parquet(tmp)
    else:
        frame.write_ndjson(tmp)


# -- --suspects (issue 11) ----------------------------------------------------------------


def _check_answers(run: Path, choice: str) -> None:
    """UsageError (before any reading) when the input has no extracted answers."""
    from curate.analysis.suspects import NO_ANSWERS
    from curate.errors import UsageError
    from curate.store.scores import has_answers

    if not has_answers(run):
        raise UsageError(f"--suspects {choice}: {NO_ANSWERS}")


def _with_suspect_labels(
    per_sample: pl.DataFrame, run: Path, choice: str, manifest: dict[str, Any] | None
) -> tuple[pl.DataFrame, int]:
    """`per_sample` with a boolean `suspect_label` column, and how many are flagged."""
    import polars as pl

    from curate.analysis.suspects import load_suspects
    from curate.errors import UsageError

    check = load_suspects(run, manifest=manifest)
    if not check.checked:
        raise UsageError(f"--suspects {choice}: {check.reason}")
    ids = check.ids().implode()
    flagged = per_sample.with_columns(pl.col("sample_id").is_in(ids).alias("suspect_label"))
    return flagged, int(check.count or 0)
