"""`curate filter`: write the learnable subset (and the rejects, with reasons): parse the
options, call `curate.filtering.filter_run`, report what was written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt
from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD
from curate.stats.columns import DIFFICULTY_COLUMN, WEIGHT_COLUMN
from curate.stats.compare import DEFAULT_ALPHA
from curate.stats.weights import DEFAULT_DELTA

# Panels keep each table's option and metavar columns narrow enough for 80 columns.
SELECT = "Which samples"
FORMATS = "Trainer formats (prompts and answers)"
INPUT = "Bare score tables"
COLUMNS = "Extra columns"
CURRICULUM = "Weights as repetitions, curricula"


@handle_errors
def filter_samples(
    run: RunArg,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="OUT",
            help="Where the kept samples go (what to name it: see above); the rejects go "
            "beside it.",
            show_default=False,
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            metavar="NAME",
            help="jsonl, parquet, verl, trl, openrlhf or openai-rft "
            "\\[default: jsonl or parquet, from OUT's suffix].",
            show_default=False,
        ),
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep",
            metavar="CATEGORY",
            help="Categories to keep (repeatable): high-variance, low-variance, mixed, "
            "always-correct, always-incorrect, all \\[default: high-variance]. With "
            "--against also learned, forgotten, newly-learnable, still-unreachable and "
            "transitions such as incorrect-to-mixed (see `curate compare`).",
            show_default=False,
            rich_help_panel=SELECT,
        ),
    ] = None,
    pass_rate: Annotated[
        str | None,
        typer.Option(
            "--pass-rate",
            metavar="LO:HI",
            help="Also require LO <= pass rate <= HI, e.g. 0.1:0.9.",
            show_default=False,
            rich_help_panel=SELECT,
        ),
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option(
            "--against",
            metavar="EARLIER_RUN",
            help="An earlier run of the same samples (another model or checkpoint): --keep "
            "may then select by the transition from it to RUN.",
            show_default=False,
            rich_help_panel=SELECT,
        ),
    ] = None,
    alpha: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="With --against: significance level for learned and forgotten.",
            rich_help_panel=SELECT,
        ),
    ] = DEFAULT_ALPHA,
    suspects: Annotated[
        str,
        typer.Option(
            "--suspects",
            metavar="keep|drop|only",
            help="Suspect labels (most rollouts agree on an answer graded wrong): keep them, "
            "drop them (drop_reason suspect_label), or keep only them, for relabelling "
            "(every category unless --keep is given). Needs extracted answers.",
            rich_help_panel=SELECT,
        ),
    ] = "keep",
    stats: Annotated[
        bool,
        typer.Option(
            help="Carry the per-sample statistics (pass rate, smoothed pass rate, variance, "
            "rollout count) into the export.",
            rich_help_panel=COLUMNS,
        ),
    ] = True,
    weights: Annotated[
        str | None,
        typer.Option(
            metavar="WEIGHTS",
            help="Per-sample weights to carry: an objective, linear, log, sqrt or arcsin "
            "(w = f'(p) on the smoothed pass rate, mean 1 over the kept samples), std (the "
            "sample's reward standard deviation across rollouts, mean 1), or a "
            "table with columns sample_id and weight that covers every kept sample.",
            show_default=False,
            rich_help_panel=COLUMNS,
        ),
    ] = None,
    weight_default: Annotated[
        float | None,
        typer.Option(
            metavar="W",
            help="Weight for kept samples the --weights table lacks (without it, such a "
            "table is refused).",
            show_default=False,
            rich_help_panel=COLUMNS,
        ),
    ] = None,
    weight_delta: Annotated[
        float,
        typer.Option(
            metavar="DELTA",
            help="Objective weights: clip the smoothed pass rate to DELTA..1-DELTA.",
            rich_help_panel=COLUMNS,
        ),
    ] = DEFAULT_DELTA,
    weight_column: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="Name of the weight column in the export.",
            rich_help_panel=COLUMNS,
        ),
    ] = WEIGHT_COLUMN,
    as_frequency: Annotated[
        bool,
        typer.Option(
            "--as-frequency",
            help="Write the --weights as repetitions, for trainers that read no weight "
            "column: each sample appears in proportion to its weight (column copies).",
            rich_help_panel=CURRICULUM,
        ),
    ] = False,
    total: Annotated[
        int | None,
        typer.Option(
            metavar="ROWS",
            help="Rows an --as-frequency export holds \\[default: the kept samples].",
            show_default=False,
            rich_help_panel=CURRICULUM,
        ),
    ] = None,
    difficulty: Annotated[
        str | None,
        typer.Option(
            metavar="column|pools",
            help="Curriculum: a difficulty column (easy, medium, hard from the pass rate), "
            "or three exports OUT.easy, OUT.medium, OUT.hard.",
            show_default=False,
            rich_help_panel=CURRICULUM,
        ),
    ] = None,
    difficulty_cuts: Annotated[
        str | None,
        typer.Option(
            metavar="LO:HI",
            help="Pass rates above HI are easy, below LO hard \\[default: 0.333:0.667].",
            show_default=False,
            rich_help_panel=CURRICULUM,
        ),
    ] = None,
    difficulty_column: Annotated[
        str,
        typer.Option(
            metavar="NAME", help="Name of the difficulty column.", rich_help_panel=CURRICULUM
        ),
    ] = DIFFICULTY_COLUMN,
    plan: Annotated[
        Path | None,
        typer.Option(
            metavar="PLAN",
            help="A rollout plan from `curate allocate`: adds its planned_rollouts column.",
            show_default=False,
            rich_help_panel=COLUMNS,
        ),
    ] = None,
    prompt_field: Annotated[
        str | None,
        typer.Option(
            metavar="FIELD",
            help="Prompt column \\[default: as `curate eval` chose].",
            show_default=False,
            rich_help_panel=FORMATS,
        ),
    ] = None,
    answer_field: Annotated[
        str | None,
        typer.Option(
            metavar="FIELD",
            help="Reference answer column, or STRUCT.FIELD \\[default: as `curate eval` chose].",
            show_default=False,
            rich_help_panel=FORMATS,
        ),
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help="Prompt template over fields \\[default: as `curate eval` chose].",
            show_default=False,
            rich_help_panel=FORMATS,
        ),
    ] = None,
    system: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help="System prompt \\[default: the run's].",
            show_default=False,
            rich_help_panel=FORMATS,
        ),
    ] = None,
    data_source: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="data_source of verl/OpenRLHF rows \\[default: the input's data_source "
            "column, else the kind of task, else the data set's file name].",
            show_default=False,
            rich_help_panel=FORMATS,
        ),
    ] = None,
    ability: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="ability of verl rows \\[default: the input's ability column, else the "
            "kind of task: code, math or multiple_choice].",
            show_default=False,
            rich_help_panel=FORMATS,
        ),
    ] = None,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="Write the export even when no sample is kept (else that is an error, exit 1).",
            rich_help_panel=SELECT,
        ),
    ] = False,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            metavar="SAMPLES",
            help="The original samples of a bare score table: their fields are written out.",
            show_default=False,
            rich_help_panel=INPUT,
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Split of a saved DatasetDict (or of a Parquet shard directory) given as "
            "--data, e.g. train.",
            show_default=False,
            rich_help_panel=INPUT,
        ),
    ] = None,
    id_field: Annotated[
        str | None,
        typer.Option(
            metavar="FIELD",
            help="Id column in --data matching sample_id \\[default: sample_id, else id].",
            show_default=False,
            rich_help_panel=INPUT,
        ),
    ] = None,
    threshold: ThresholdOpt = DEFAULT_THRESHOLD,
    group_size: GroupSizeOpt = DEFAULT_GROUP_SIZE,
) -> None:
    """Keep the samples with learning signal; write the rest beside them with a drop_reason.

    What to name OUT (-o), by --format:
      jsonl, openrlhf, openai-rft: a file, e.g. -o runs/x/train.jsonl
      parquet, verl: a file, e.g. -o runs/x/train.parquet
      trl: a name without a suffix: -o runs/x/train writes the directory
        runs/x/train/ (for datasets.load_from_disk) and runs/x/train.parquet
    The rejects go beside OUT: train.rejects.jsonl (.parquet for a .parquet OUT).
    """
    from curate.filtering import FilterRequest, filter_run

    # Relabelling wants every suspect, whatever its category, unless --keep says otherwise.
    only_suspects = suspects.strip().lower() == "only"
    request = FilterRequest(
        run,
        output,
        keep=keep or (["all"] if only_suspects else ["high-variance"]),
        suspects=suspects,
        against=against,
        alpha=alpha,
        pass_rate=pass_rate,
        data=data,
        split=split,
        id_field=id_field,
        format=format,
        stats=stats,
        weights=weights,
        weight_delta=weight_delta,
        weight_default=weight_default,
        plan=plan,
        weight_column=weight_column,
        data_source=data_source,
        ability=ability,
        allow_empty=allow_empty,
        prompt_field=prompt_field,
        answer_field=answer_field,
        template=template,
        system=system,
        threshold=threshold,
        group_size=group_size,
        as_frequency=as_frequency,
        total=total,
        difficulty=difficulty,
        difficulty_cuts=difficulty_cuts,
        difficulty_column=difficulty_column,
    )
    result = filter_run(request)
    where = " and ".join(str(p) for p in result.paths)
    label = "" if result.format in ("jsonl", "parquet") else f" ({result.format})"
    print(f"kept {result.kept} of {result.total} samples -> {where}{label}")
    if result.frequency is not None:
        f = result.frequency
        print(
            f"as frequency: {f.rows} rows for {f.samples} samples (up to {f.max_copies} "
            f"copies each)"
            + (f"; {f.left_out} kept samples weigh too little for a copy" if f.left_out else "")
        )
    if result.pools is not None:
        print("pools: " + ", ".join(f"{k} {v}" for k, v in result.pools.items()))
    if result.weights_filled:
        # On stderr: a filled weight is a decision the user made, worth seeing in a log.
        print(
            f"note: {result.weights_filled} of {result.kept} kept samples had no weight "
            f"in {weights}; gave them --weight-default {weight_default:g}",
            file=sys.stderr,
        )
    if result.plan_total is not None and result.plan_kept != result.plan_total:
        # A plan over the whole run spends part of its budget on samples dropped here.
        print(
            f"plan: the kept samples hold {result.plan_kept} of its {result.plan_total} "
            "rollouts; the rest are planned for samples not kept"
        )
    if result.plan_missing:
        print(
            f"note: {result.plan_missing} kept sample(s) are not in the plan "
            "(planned_rollouts null)"
        )
    for note in result.notes:
        print(note)
    if result.suspects is not None:
        print(f"suspect labels: {result.suspects} (majority answer graded wrong)")
    if result.dropped:
        print(f"dropped {result.dropped} -> {result.rejects}")
        for reason, count in result.drop_reasons:
            print(f"  {count:>8}  {reason}")
    if result.unmatched:
        print(f"note: {result.unmatched} scored sample(s) had no matching row in the samples file")
