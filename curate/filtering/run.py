"""`filter_run`: write the learnable subset of a run in a training format, and the
rejects beside it with a drop_reason (the library call behind `curate filter`).

One pass in four steps, each a function of the one before: the request is checked
(`check_request`, before anything is read), the samples are selected (`select`: scores,
labels and comparisons read, each sample kept or given a drop_reason), the kept ones are
annotated (`annotate`: weights, the rollout plan, difficulty, repetitions), and the
export is written (`export`: every file and the rejects together, or none).
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from curate.allocation import join_plan
from curate.analysis import load_analysis
from curate.analysis.compare import compare_runs
from curate.analysis.load import LoadedAnalysis
from curate.analysis.suspects import load_suspects
from curate.data.samples import FieldMap
from curate.data.sources import read_source
from curate.errors import RunError, UsageError
from curate.exports import (
    ExportBatch,
    default_ability,
    default_data_source,
    export_fields,
    prepare_batch,
    write_export,
)
from curate.exports.kind import task_kind
from curate.filtering import curriculum
from curate.filtering.curriculum import Frequency
from curate.filtering.request import CheckedRequest, FilterRequest, check_request
from curate.filtering.select import TRANSITION, attach_fields, decide, stat_collisions
from curate.filtering.weights import table_weights
from curate.stats.compare import SETS, transition_name
from curate.stats.weights import STD, weight_table
from curate.store.atomic import atomic_path
from curate.store.manifest import RunManifest
from curate.store.tables import read_table

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
    frequency: Frequency | None = None  # --as-frequency: rows written, samples left out
    pools: dict[str, int] | None = None  # --difficulty pools: samples per level

    @property
    def dropped(self) -> int:
        return self.total - self.kept

    @property
    def unmatched(self) -> int:
        """Scored samples with no matching row in the samples file."""
        return self.scored - self.total


@dataclass(frozen=True)
class Selection:
    """The inputs as read, and every sample's decision (`select`)."""

    loaded: LoadedAnalysis
    samples: pl.DataFrame | None  # the original samples (None for a bare table)
    decisions: pl.DataFrame  # per-sample statistics with kept and drop_reason
    rows: pl.DataFrame  # original fields then statistics, one row per matched sample
    kept: pl.DataFrame
    dropped: pl.DataFrame  # with drop_reason
    moved: dict[str, str]  # input columns renamed because a statistic takes the name
    input_columns: list[str]  # the input's columns, under the names they are kept as
    weight_table: pl.DataFrame | None  # a --weights table as read (unchecked)
    plan: pl.DataFrame | None  # a --plan as read
    rate_column: str  # the rate --pass-rate and --difficulty read
    suspects: int | None = None  # suspect labels flagged, when --suspects asked


@dataclass(frozen=True)
class Annotated:
    """The kept samples with the columns asked for (`annotate`)."""

    rows: pl.DataFrame  # what is written (repeated rows for --as-frequency)
    samples: pl.DataFrame  # one row per kept sample
    weights: pl.DataFrame | None  # sample_id, weight for the export's weight column
    weights_filled: int
    plan_total: int | None
    extra_stats: tuple[str, ...]  # columns carried even with --no-stats
    frequency: Frequency | None


def filter_run(request: FilterRequest) -> FilterResult:
    """Check `request`, select the samples, annotate the kept ones and write them to
    `request.output` (and the rejects to `rejects_path(request.output)`), all files or
    none. Bad options fail before the scores are read. OUT's directory is created."""
    checked = check_request(request)
    selection = select(checked)
    annotated = annotate(checked, selection)
    return export(checked, selection, annotated)


def select(checked: CheckedRequest) -> Selection:
    """Read the scores (and --data, --weights, --plan, --against, the suspect labels)
    and decide for every sample: kept, or dropped with its reason."""
    r, spec = checked.request, checked.spec
    loaded = load_analysis(checked.run, threshold=r.threshold, group_size=r.group_size)
    # The same reader (and split rules) as `curate eval`, so --split means the same there.
    data = checked.data
    samples = read_source(data, split=r.split) if data is not None else loaded.samples()
    if checked.format.needs_prompts and samples is None:
        raise UsageError(
            f"--format {checked.format.name} needs each sample's prompt and answer: filter "
            "a run directory from `curate eval`, or pass the original samples with --data"
        )
    weights = read_table(checked.weights_path) if checked.weights_path is not None else None
    plan = read_table(checked.plan_path) if checked.plan_path is not None else None
    id_field = r.id_field
    if id_field is None:
        id_field = "sample_id" if samples is None or "sample_id" in samples.columns else "id"
    if loaded.manifest is not None and loaded.manifest.adaptive:
        # An adaptive run stops drawing once a sample is mixed, which biases c/n toward
        # 1/2: bound the posterior mean instead.
        spec = replace(spec, rate_column="smoothed_pass_rate")
    per_sample, flagged = loaded.per_sample, None
    if spec.suspects != "keep":
        per_sample, flagged = _with_suspect_labels(
            per_sample, checked.run, spec.suspects, loaded.manifest
        )
    if checked.against is not None:
        per_sample = _with_transitions(
            per_sample,
            checked.against,
            checked.run,
            alpha=r.alpha,
            threshold=r.threshold,
            group_size=r.group_size,
        )
    decisions = decide(per_sample, spec)
    rows = attach_fields(decisions, samples, id_field=id_field, source=data or checked.run)
    moved = stat_collisions(samples.columns) if samples is not None else {}
    input_columns = (
        [moved.get(c, c) for c in samples.columns if c != "_join_id"] if samples is not None else []
    )
    return Selection(
        loaded=loaded,
        samples=samples,
        decisions=decisions,
        rows=rows,
        kept=rows.filter(pl.col("kept")).drop("kept", "drop_reason"),
        dropped=rows.filter(~pl.col("kept")).drop("kept"),
        moved=moved,
        input_columns=input_columns,
        weight_table=weights,
        plan=plan,
        rate_column=spec.rate_column,
        suspects=flagged,
    )


def annotate(checked: CheckedRequest, selection: Selection) -> Annotated:
    """The kept samples with their weights, planned rollouts and difficulty, repeated
    by weight for --as-frequency."""
    r = checked.request
    kept = selection.kept
    weights, filled = None, 0
    if checked.objective is not None:
        # `std` reads the per-sample statistics, which the export rows do not carry.
        decisions = selection.decisions
        source = decisions.filter(pl.col("kept")) if checked.objective == STD else kept
        weights = weight_table(source, checked.objective, r.weight_delta)
    elif selection.weight_table is not None:
        table = table_weights(
            selection.weight_table,
            kept["sample_id"].cast(pl.String).to_list(),
            default=r.weight_default,
            source=checked.weights_path,
        )
        weights, filled = table.frame, table.filled
    plan_total = None
    if selection.plan is not None:
        kept = join_plan(kept, selection.plan, source=checked.plan_path)
        plan_total = int(selection.plan["planned_rollouts"].cast(pl.Int64).sum())
    extra_stats: tuple[str, ...] = ()
    if r.difficulty is not None:
        if r.difficulty_column in kept.columns:
            raise UsageError(
                f"--difficulty: the samples already have a '{r.difficulty_column}' column; "
                "name curate's with --difficulty-column NAME"
            )
        kept = kept.with_columns(
            curriculum.difficulty_expr(selection.rate_column, checked.cuts, r.difficulty_column)
        )
        extra_stats += (r.difficulty_column,)
    rows, frequency = kept, None
    if r.as_frequency:
        assert weights is not None  # check_request: --as-frequency needs --weights
        rows, frequency = curriculum.expand_by_frequency(kept, weights, r.total)
        weights = None  # the repetitions carry the weights now
        extra_stats += (curriculum.COPIES_COLUMN,)
    return Annotated(
        rows=rows,
        samples=kept,
        weights=weights,
        weights_filled=filled,
        plan_total=plan_total,
        extra_stats=extra_stats,
        frequency=frequency,
    )


def export(checked: CheckedRequest, selection: Selection, annotated: Annotated) -> FilterResult:
    """Write the kept samples in the requested format (one file, or one per difficulty
    pool) and the rejects beside them, all or none; a RunError when none is kept."""
    r, fmt = checked.request, checked.format
    dropped = selection.dropped
    reasons = dropped.group_by("drop_reason").len().sort("len", descending=True)
    kept_samples = annotated.samples
    if kept_samples.height == 0 and not r.allow_empty:
        why = ", ".join(f"{count} {reason}" for reason, count in reasons.rows())
        raise RunError(
            f"kept 0 of {selection.rows.height} samples ({why or 'none scored'}); nothing "
            "written (pass --allow-empty to write an empty export)"
        )
    rejects = rejects_path(checked.output)
    notes: list[str] = []
    if selection.moved:
        moved = selection.moved
        pairs = ", ".join(f"'{a}' as '{b}'" for a, b in moved.items())
        what, names = ("column", "that name") if len(moved) == 1 else ("columns", "those names")
        notes.append(f"note: kept the input's {what} {pairs} (curate's statistics take {names})")
    level = pl.col(r.difficulty_column)
    pools = [
        (path, annotated.rows if name is None else annotated.rows.filter(level == name))
        for path, name in checked.outputs
    ]
    # Every output file and the rejects appear together or not at all, in a directory
    # made for them when needed (and removed again when the write fails).
    written_paths: list[Path] = []
    fields = _fields(checked, selection)
    made = _make_parents(checked.output)
    try:
        with ExitStack() as stack:
            for path, rows in pools:
                batch = _batch(checked, selection, annotated, rows, fields)
                written = write_export(fmt, batch, path, stack=stack)
                written_paths += list(written.paths)
                notes += [n for n in written.notes if n not in notes]
            write_rejects(dropped, stack.enter_context(atomic_path(rejects)), rejects)
    except BaseException:
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError:
                break
        raise
    planned = annotated.plan_total is not None
    return FilterResult(
        format=fmt.name,
        paths=written_paths,
        rejects=rejects,
        kept=kept_samples.height,
        total=selection.rows.height,
        scored=selection.loaded.per_sample.height,
        drop_reasons=[(str(reason), int(count)) for reason, count in reasons.rows()],
        notes=notes,
        weights_filled=annotated.weights_filled,
        plan_total=annotated.plan_total,
        plan_kept=int(kept_samples["planned_rollouts"].sum()) if planned else 0,
        plan_missing=kept_samples["planned_rollouts"].null_count() if planned else 0,
        suspects=selection.suspects,
        frequency=annotated.frequency,
        pools=(
            {
                name: int((kept_samples[r.difficulty_column] == name).sum())
                for name in curriculum.DIFFICULTY_LEVELS
            }
            if r.difficulty == "pools"
            else None
        ),
    )


def _fields(checked: CheckedRequest, selection: Selection) -> FieldMap | None:
    """The prompt and answer fields a trainer format needs (None for the generic ones)."""
    if not checked.format.needs_prompts or selection.samples is None:
        return None
    r, data = checked.request, checked.data
    return export_fields(
        selection.samples,
        manifest=None if data is not None else (selection.loaded.manifest or RunManifest()),
        prompt_field=r.prompt_field,
        answer_field=r.answer_field,
        template=r.template,
        source=data or checked.run,
    )


def _batch(
    checked: CheckedRequest,
    selection: Selection,
    annotated: Annotated,
    rows: pl.DataFrame,
    fields: FieldMap | None,
) -> ExportBatch:
    """One file's rows as an `ExportBatch`: prompts built as the run built them, the
    statistics, weights, plan and curriculum columns carried."""
    r, data = checked.request, checked.data
    manifest = selection.loaded.manifest or RunManifest()
    origin = data or checked.run
    batch = prepare_batch(
        rows,
        fields=fields,
        mode=manifest.prompt_mode,
        system=r.system if r.system is not None else manifest.system,
        data_source=r.data_source,
        default_source=default_data_source(manifest, data),
        stats=r.stats,
        weights=annotated.weights,
        weight_column=r.weight_column,
        source=checked.weights_path or origin,
        input_columns=[c for c in selection.input_columns if c in rows.columns],
        ability=r.ability,
        default_ability=default_ability(manifest),
        kind=task_kind(manifest),
    )
    if annotated.plan_total is not None:  # every format carries the plan, like a statistic
        batch = replace(batch, stat_columns=(*batch.stat_columns, "planned_rollouts"))
    # Curriculum columns are carried even with --no-stats: they were asked for.
    return replace(batch, stat_columns=(*batch.stat_columns, *annotated.extra_stats))


def _make_parents(output: Path) -> list[Path]:
    """Create OUT's missing parent directories; the ones made, outermost first."""
    missing: list[Path] = []
    parent = output.absolute().parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    missing.reverse()
    for path in missing:
        path.mkdir()
    return missing


def write_rejects(frame: pl.DataFrame, tmp: Path, final: Path) -> None:
    """The rejects in the format the final name asks for (Parquet, else JSON Lines)."""
    if final.suffix.lower() in (".parquet", ".pq"):
        frame.write_parquet(tmp)
    else:
        frame.write_ndjson(tmp)


def _with_transitions(
    per_sample: pl.DataFrame,
    against: Path,
    run: Path,
    *,
    alpha: float,
    threshold: float,
    group_size: int,
) -> pl.DataFrame:
    """`per_sample` with each sample's transition from `against` to `run` (its --keep
    name; null when the sample is not scored in both) and one boolean column per named
    set, from `compare_runs` (the numbers `curate compare` prints)."""
    compared = compare_runs([against, run], alpha=alpha, group_size=group_size, threshold=threshold)
    names = {
        (a, b): transition_name(a, b)
        for a, b in compared.samples.select("outcome_a", "outcome_b").unique().iter_rows()
    }
    mapping = pl.DataFrame(
        [(a, b, name) for (a, b), name in names.items()],
        schema={"outcome_a": pl.String, "outcome_b": pl.String, TRANSITION: pl.String},
        orient="row",
    )
    table = compared.samples.join(mapping, on=["outcome_a", "outcome_b"], how="left").select(
        "sample_id", TRANSITION, *SETS
    )
    clash = [c for c in (TRANSITION, *SETS) if c in per_sample.columns]
    return per_sample.drop(clash).join(table, on="sample_id", how="left")


def _with_suspect_labels(
    per_sample: pl.DataFrame, run: Path, choice: str, manifest: RunManifest | None
) -> tuple[pl.DataFrame, int]:
    """`per_sample` with a boolean `suspect_label` column, and how many are flagged."""
    check = load_suspects(run, manifest=manifest)
    if not check.checked:
        raise UsageError(f"--suspects {choice}: {check.reason}")
    ids = check.ids().implode()
    flagged = per_sample.with_columns(pl.col("sample_id").is_in(ids).alias("suspect_label"))
    return flagged, int(check.count or 0)
