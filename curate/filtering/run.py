"""`filter_run`: write the learnable subset of a run in a training format, and the
rejects beside it with a drop_reason (the library call behind `curate filter`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.outcome import DEFAULT_THRESHOLD
from curate.filtering.select import FilterSpec, parse_range, parse_suspects, split_keep
from curate.stats.per_sample import DEFAULT_GROUP_SIZE

if TYPE_CHECKING:
    import polars as pl

    from curate.filtering.curriculum import Frequency

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
    ability: str | None = None,
    allow_empty: bool = False,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    template: str | None = None,
    system: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    suspects: str = "keep",
    against: str | os.PathLike[str] | None = None,
    alpha: float = 0.05,
    as_frequency: bool = False,
    total: int | None = None,
    difficulty: str | None = None,
    difficulty_cuts: str | tuple[float, float] | None = None,
    difficulty_column: str = "difficulty",
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

    `against` names an earlier run of the same samples: `keep` may then also name the
    sets and transitions of `curate compare` from that run to `run` (learned, forgotten,
    newly-learnable, still-unreachable, incorrect-to-mixed, ...; significance at
    `alpha`), kept in addition to the categories `keep` names.

    `as_frequency` turns the weights into repetitions (`total` rows in all; the weight
    column is then left out, the count kept in `copies`). `difficulty` "column" adds an
    easy/medium/hard `difficulty` column from the pass rate (`difficulty_cuts` LO:HI);
    "pools" writes the three levels to OUT.easy, OUT.medium and OUT.hard instead of OUT.

    Every input column is carried into every format (`curate.exports.columns`);
    `data_source` and `ability` name verl's and OpenRLHF's fields, which otherwise come
    from the run's kind of task (`curate.exports.kind`). OUT's directory is created. A
    filter that keeps no sample is a RunError and writes nothing, unless `allow_empty`.
    """
    from contextlib import ExitStack
    from dataclasses import replace

    import polars as pl

    from curate.allocation import join_plan
    from curate.analysis import load_analysis
    from curate.data.sources import read_source
    from curate.errors import RunError, UsageError
    from curate.exports import (
        default_ability,
        default_data_source,
        export_fields,
        format_for_output,
        get_format,
        prepare_batch,
        write_export,
    )
    from curate.exports.kind import task_kind
    from curate.filtering import curriculum
    from curate.filtering.select import attach_fields, decide, stat_collisions
    from curate.filtering.weights import check_weight_default, table_weights
    from curate.stats.weights import STD, WEIGHT_KINDS, check_objective, weight_table
    from curate.store.atomic import atomic_path
    from curate.store.tables import read_table

    run, output = Path(run), Path(output)
    data = Path(data) if data is not None else None
    if as_frequency and weights is None:
        raise UsageError("--as-frequency turns --weights into repetitions: give --weights too")
    if total is not None and not as_frequency:
        raise UsageError("--total sets the size of an --as-frequency export: add --as-frequency")
    if difficulty not in (None, "column", "pools"):
        raise UsageError(f"--difficulty {difficulty!r}: expected column or pools")
    cuts = curriculum.parse_cuts(difficulty_cuts)
    if difficulty_cuts is not None and difficulty is None:
        raise UsageError("--difficulty-cuts needs --difficulty column or pools")
    # Output and option checks come first: a bad name costs no reading.
    fmt = get_format(format) if format is not None else format_for_output(output)
    fmt.check_output(output)
    if isinstance(pass_rate, str):
        pass_rate = parse_range(pass_rate) if pass_rate else None
    categories, compare = split_keep(list(keep), against=against is not None)
    spec = FilterSpec(
        keep=categories,
        pass_rate=pass_rate,
        suspects=parse_suspects(suspects),
        compare=compare,
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
    if against is not None:
        per_sample = _with_transitions(
            per_sample, Path(against), run, alpha=alpha, threshold=threshold, group_size=group_size
        )
    decisions = decide(per_sample, spec)
    rows = attach_fields(decisions, samples, id_field=id_field, source=data or run)
    moved = stat_collisions(samples.columns) if samples is not None else {}
    input_columns = (
        [moved.get(c, c) for c in samples.columns if c != "_join_id"] if samples is not None else []
    )
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
    extra_stats: tuple[str, ...] = ()
    if difficulty is not None:
        if difficulty_column in kept.columns:
            raise UsageError(
                f"--difficulty: the samples already have a '{difficulty_column}' column; "
                "name curate's with --difficulty-column NAME"
            )
        kept = kept.with_columns(
            curriculum.difficulty_expr(spec.rate_column, cuts, difficulty_column)
        )
        extra_stats += (difficulty_column,)
    frequency = None
    kept_samples, kept_once = kept.height, kept
    if as_frequency:
        assert weight_frame is not None
        kept, frequency = curriculum.expand_by_frequency(kept, weight_frame, total)
        weight_frame = None  # the repetitions carry the weights now
        extra_stats += (curriculum.COPIES_COLUMN,)

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

    def batch_of(rows: pl.DataFrame) -> Any:
        batch = prepare_batch(
            rows,
            fields=fields,
            mode="completion" if manifest.get("mode") == "completion" else "chat",
            system=system if system is not None else manifest.get("system"),
            data_source=data_source,
            default_source=default_data_source(manifest, data),
            stats=stats,
            weights=weight_frame,
            weight_column=weight_column,
            source=weights_path or origin,
            input_columns=[c for c in input_columns if c in rows.columns],
            ability=ability,
            default_ability=default_ability(manifest),
            kind=task_kind(manifest),
        )
        if plan_frame is not None:  # every format carries the plan, like a statistic
            batch = replace(batch, stat_columns=(*batch.stat_columns, "planned_rollouts"))
        # Curriculum columns are carried even with --no-stats: they were asked for.
        return replace(batch, stat_columns=(*batch.stat_columns, *extra_stats))

    if difficulty == "pools":
        level = pl.col(difficulty_column)
        pools = [
            (Path(curriculum.pool_path(str(output), name)), kept.filter(level == name))
            for name in curriculum.DIFFICULTY_LEVELS
        ]
        for path, _ in pools:
            fmt.check_output(path)
    else:
        pools = [(output, kept)]
    reasons = dropped.group_by("drop_reason").len().sort("len", descending=True)
    if kept_samples == 0 and not allow_empty:
        why = ", ".join(f"{count} {reason}" for reason, count in reasons.rows())
        raise RunError(
            f"kept 0 of {rows.height} samples ({why or 'none scored'}); nothing written "
            "(pass --allow-empty to write an empty export)"
        )
    rejects = rejects_path(output)
    notes: list[str] = []
    if moved:
        pairs = ", ".join(f"'{a}' as '{b}'" for a, b in moved.items())
        what, names = ("column", "that name") if len(moved) == 1 else ("columns", "those names")
        notes.append(f"note: kept the input's {what} {pairs} (curate's statistics take {names})")
    # Every output file and the rejects appear together or not at all, in a directory
    # made for them when needed (and removed again when the write fails).
    written_paths: list[Path] = []
    made = _make_parents(output)
    try:
        with ExitStack() as stack:
            for path, rows_of_pool in pools:
                written = write_export(fmt, batch_of(rows_of_pool), path, stack=stack)
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
    return FilterResult(
        format=fmt.name,
        paths=written_paths,
        rejects=rejects,
        kept=kept_samples,
        total=rows.height,
        scored=loaded.per_sample.height,
        drop_reasons=[(str(reason), int(count)) for reason, count in reasons.rows()],
        notes=notes,
        weights_filled=filled,
        plan_total=plan_total,
        plan_kept=int(kept_once["planned_rollouts"].sum()) if plan_total is not None else 0,
        plan_missing=kept_once["planned_rollouts"].null_count() if plan_total is not None else 0,
        suspects=flagged,
        frequency=frequency,
        pools=(
            {
                name: int((kept_once[difficulty_column] == name).sum())
                for name in curriculum.DIFFICULTY_LEVELS
            }
            if difficulty == "pools"
            else None
        ),
    )


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
    import polars as pl

    from curate.analysis.compare import compare_runs
    from curate.filtering.select import TRANSITION
    from curate.stats.compare import SETS, transition_name

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
