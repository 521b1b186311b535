"""`curate filter`: write the learnable subset (and the rejects, with reasons): parse the
options, call `curate.filtering.filter_run`, report what was written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt


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
    from curate.filtering import filter_run

    result = filter_run(
        run,
        output,
        keep=keep or ["high-variance"],
        pass_rate=pass_rate,
        data=data,
        split=split,
        id_field=id_field,
        format=format,
        stats=stats,
        weights=weights,
        weight_delta=weight_delta,
        plan=plan,
        weight_column=weight_column,
        data_source=data_source,
        prompt_field=prompt_field,
        answer_field=answer_field,
        template=template,
        system=system,
        threshold=threshold,
        group_size=group_size,
    )
    where = " and ".join(str(p) for p in result.paths)
    label = "" if result.format in ("jsonl", "parquet") else f" ({result.format})"
    print(f"kept {result.kept} of {result.total} samples -> {where}{label}")
    for note in result.notes:
        print(note)
    if result.dropped:
        print(f"dropped {result.dropped} -> {result.rejects}")
        for reason, count in result.drop_reasons:
            print(f"  {count:>8}  {reason}")
    if result.unmatched:
        print(f"note: {result.unmatched} scored sample(s) had no matching row in the samples file")
