"""`curate ingest`: a trainer's rollout files as run directories (parse the options, call
`curate.evaluation.ingest.ingest`, print what was written)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors

DATA = "Matching prompts to the data set"


@handle_errors
def ingest(
    source: Annotated[
        Path,
        typer.Argument(
            help="The trainer's rollout files: verl's trainer.rollout_data_dir ({step}.jsonl), "
            "or TRL's output_dir or its completions/ folder (log_completions=True).",
            show_default=False,
        ),
    ],
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            "-d",
            help="The curated data set the trainer read (JSONL, Parquet, CSV or a saved HF "
            "data set): its sample ids name the rollouts.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="DIR",
            help="Where the run directories go: DIR/step-NNNNNN (DIR/ingest.json lists them).",
            show_default=False,
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            metavar="NAME",
            help="verl or trl \\[default: from the files].",
            show_default=False,
        ),
    ] = None,
    score_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The reward column to use \\[default: verl: acc, else score; trl: the one "
            "reward column].",
            show_default=False,
        ),
    ] = None,
    score_range: Annotated[
        str | None,
        typer.Option(
            metavar="LO:HI",
            help="The reward's range when it is not [0, 1], e.g. -1:1: mapped onto [0, 1], "
            "the raw value kept in raw_score.",
            show_default=False,
        ),
    ] = None,
    steps: Annotated[
        str | None,
        typer.Option(
            metavar="A:B", help="Only these steps (inclusive; A: or :B).", show_default=False
        ),
    ] = None,
    steps_per_run: Annotated[
        int,
        typer.Option(min=1, help="Steps pooled into one run directory."),
    ] = 1,
    prompt_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The data set's prompt column.",
            show_default=False,
            rich_help_panel=DATA,
        ),
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help="The prompt as a template of the data set's columns.",
            show_default=False,
            rich_help_panel=DATA,
        ),
    ] = None,
    id_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The data set's id column.",
            show_default=False,
            rich_help_panel=DATA,
        ),
    ] = None,
    answer_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The data set's reference column.",
            show_default=False,
            rich_help_panel=DATA,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="The policy's name in the manifests.", show_default=False
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace run directories ingested before.")
    ] = False,
) -> None:
    """Turn a trainer's rollout files into run directories, one per step."""
    from curate.evaluation.ingest import ingest as run_ingest
    from curate.evaluation.ingest import parse_steps
    from curate.evaluation.preflight import parse_score_range
    from curate.graders.base import ScoreRange

    result = run_ingest(
        source,
        data,
        output,
        format=format,
        score_field=score_field,
        score_range=ScoreRange(*parse_score_range(score_range)) if score_range else None,
        steps=parse_steps(steps),
        steps_per_run=steps_per_run,
        prompt_field=prompt_field,
        answer_field=answer_field,
        id_field=id_field,
        template=template,
        model=model,
        force=force,
    )
    left_out = [
        f"{n} {what}"
        for n, what in (
            (result.unmatched_rollouts, "matched no sample"),
            (result.ambiguous_rollouts, "matched several"),
        )
        if n
    ]
    print(
        f"ingest: {len(result.runs)} run(s) from {result.format} files, "
        f"score {result.score_field!r}; {result.rollouts} of {result.read_rollouts} rollouts "
        f"matched to samples of {data}" + (f" ({', '.join(left_out)})" if left_out else "")
    )
    methods = ", ".join(f"{count} {how}" for how, count in sorted(result.matched_by.items()))
    print(f"  prompts matched: {methods or 'none'}")
    for run in result.runs:
        steps_text = (
            f"step {run.first_step}"
            if run.first_step == run.last_step
            else f"steps {run.first_step}-{run.last_step}"
        )
        print(
            f"  {run.path}: {steps_text}, {run.rollouts} rollouts of {run.samples} samples "
            f"(up to {run.max_rollouts_per_sample} each)"
        )
    if result.unmatched_prompts or result.ambiguous_prompts:
        print(
            f"curate: warning: {result.unmatched_prompts} prompt(s) matched no sample and "
            f"{result.ambiguous_prompts} matched several; their rollouts are left out"
            + (f" (e.g. {result.unmatched_examples[0]!r})" if result.unmatched_examples else ""),
            file=sys.stderr,
        )
    if len(result.runs) > 1:
        print(f"next: curate compare {result.runs[0].path} {result.runs[-1].path}")
    else:
        print(f"next: curate report {result.runs[0].path}")
