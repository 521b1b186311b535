"""`curate filter`: write the learnable subset (and the rejects, with reasons)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt

_TABLE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq")


def rejects_path(output: Path) -> Path:
    """OUT.jsonl -> OUT.rejects.jsonl, beside the output (OUT -> OUT.rejects.jsonl)."""
    if output.suffix.lower() not in _TABLE_SUFFIXES:
        return output.with_name(f"{output.name}.rejects.jsonl")
    return output.with_name(f"{output.stem}.rejects{output.suffix}")


@handle_errors
def filter_samples(
    run: RunArg,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Kept samples: a file (.jsonl or .parquet), or for --format trl a directory.",
            show_default=False,
        ),
    ],
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep",
            help="Categories to keep (repeatable): high-variance, low-variance, mixed, "
            "always-correct, always-incorrect, all.",
        ),
    ] = None,
    pass_rate: Annotated[
        str | None,
        typer.Option("--pass-rate", help="Also require LO <= pass rate <= HI, e.g. 0.1:0.9."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Original samples (for a bare score table): their fields are written out.",
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            help="Split of a saved DatasetDict (or of a Parquet shard directory) given as "
            "--data, e.g. train.",
            show_default=False,
        ),
    ] = None,
    id_field: Annotated[
        str | None,
        typer.Option(help="Id column in --data matching sample_id (default: sample_id, else id)."),
    ] = None,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="jsonl, parquet, verl, trl, openrlhf or openai-rft "
            "\\[default: jsonl or parquet, from the output's suffix].",
            show_default=False,
        ),
    ] = None,
    stats: Annotated[
        bool,
        typer.Option(
            help="Carry the per-sample statistics (pass rate, smoothed pass rate, variance, "
            "rollout count) into the export."
        ),
    ] = True,
    weights: Annotated[
        str | None,
        typer.Option(
            help="Per-sample weights to carry: an objective, linear|log|sqrt|arcsin "
            "(w = f'(p) on the smoothed pass rate, mean 1 over the kept samples), or a "
            "table with columns sample_id and weight.",
            show_default=False,
        ),
    ] = None,
    weight_delta: Annotated[
        float,
        typer.Option(help="Objective weights: clip the smoothed pass rate to delta..1-delta."),
    ] = 0.05,
    plan: Annotated[
        Path | None,
        typer.Option(
            help="A rollout plan from `curate allocate`: adds its planned_rollouts column.",
            show_default=False,
        ),
    ] = None,
    weight_column: Annotated[
        str, typer.Option(help="Name of the weight column in the export.")
    ] = "weight",
    data_source: Annotated[
        str | None,
        typer.Option(
            help="data_source of verl/OpenRLHF rows \\[default: the input's data_source column, "
            "else the data set's file name].",
            show_default=False,
        ),
    ] = None,
    prompt_field: Annotated[
        str | None,
        typer.Option(help="Prompt column \\[default: as `curate eval` chose].", show_default=False),
    ] = None,
    answer_field: Annotated[
        str | None,
        typer.Option(
            help="Reference answer column, or STRUCT.FIELD \\[default: as `curate eval` chose].",
            show_default=False,
        ),
    ] = None,
    template: Annotated[
        str | None, typer.Option(help="Prompt template over fields.", show_default=False)
    ] = None,
    system: Annotated[
        str | None,
        typer.Option(help="System prompt \\[default: the run's].", show_default=False),
    ] = None,
    threshold: ThresholdOpt = 0.01,
    group_size: GroupSizeOpt = 8,
) -> None:
    """Keep the samples with learning signal; write the rest beside them with a drop_reason."""
    from contextlib import ExitStack
    from dataclasses import replace

    import polars as pl

    from curate.allocation import join_plan
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
    from curate.filtering import FilterSpec, attach_fields, decide, parse_keep, parse_range
    from curate.stats.analysis import analyze
    from curate.stats.weights import OBJECTIVES, check_objective, weight_table
    from curate.store.atomic import atomic_path
    from curate.store.scores import load_scores
    from curate.store.tables import read_table

    # Output and option checks come first: a bad name costs no reading.
    fmt = get_format(format) if format is not None else format_for_output(output)
    fmt.check_output(output)
    spec = FilterSpec(
        keep=parse_keep(keep or ["high-variance"]),
        pass_rate=parse_range(pass_rate) if pass_rate else None,
    )
    if split is not None and data is None:
        # A run directory keeps the samples it evaluated: only --data has splits to pick.
        raise UsageError("--split picks a split of --data; pass --data too")
    source = load_scores(run)
    # The same reader (and split rules) as `curate eval`, so --split means the same there.
    samples = read_source(data, split=split) if data is not None else source.samples()
    if fmt.needs_prompts and samples is None:
        raise UsageError(
            f"--format {fmt.name} needs each sample's prompt and answer: filter a run "
            "directory from `curate eval`, or pass the original samples with --data"
        )
    # --weights names an objective (computed below, on the kept samples) or a file.
    objective = weights if weights in OBJECTIVES and not Path(weights).exists() else None
    if objective is not None:
        check_objective(objective, weight_delta)
    weights_path = Path(weights) if weights is not None and objective is None else None
    weight_frame = read_table(weights_path) if weights_path is not None else None
    plan_frame = read_table(plan) if plan is not None else None
    if id_field is None:
        id_field = "sample_id" if samples is None or "sample_id" in samples.columns else "id"
    analysis = analyze(source.rollouts, threshold=threshold, group_size=group_size)
    decisions = decide(analysis.per_sample, spec)
    rows = attach_fields(decisions, samples, id_field=id_field, source=data or run)
    kept = rows.filter(pl.col("kept")).drop("kept", "drop_reason")
    dropped = rows.filter(~pl.col("kept")).drop("kept")
    if objective is not None:
        weight_frame = weight_table(kept, objective, weight_delta)
    if plan_frame is not None:
        kept = join_plan(kept, plan_frame, source=plan)

    manifest = source.manifest or {}
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
        result = write_export(fmt, batch, output, stack=stack)
        tmp_rej = stack.enter_context(atomic_path(rejects))
        _write(dropped, tmp_rej, rejects)
    total = rows.height
    where = " and ".join(str(p) for p in result.paths)
    label = "" if fmt.name in ("jsonl", "parquet") else f" ({fmt.name})"
    print(f"kept {kept.height} of {total} samples -> {where}{label}")
    for note in result.notes:
        print(note)
    if dropped.height:
        print(f"dropped {dropped.height} -> {rejects}")
        counts = dropped.group_by("drop_reason").len().sort("len", descending=True)
        for reason, count in counts.rows():
            print(f"  {count:>8}  {reason}")
    unmatched = analysis.per_sample.height - total
    if unmatched:
        print(f"note: {unmatched} scored sample(s) had no matching row in the samples file")


def _write(frame: object, tmp: Path, final: Path) -> None:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    if final.suffix.lower() in (".parquet", ".pq"):
        frame.write_parquet(tmp)
    else:
        frame.write_ndjson(tmp)
