"""`curate report`: the data-set summary, and CI checks on it (parse the options, call
`curate.report.build.build_report`, render it)."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt
from curate.cli.output import stdout_console, write_stdout

if TYPE_CHECKING:
    from curate.analysis.suspects import SuspectCheck


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


class Trainer(str, Enum):
    """Trainers whose dynamic-sampling settings `--trainer` prints."""

    verl = "verl"
    nemo_rl = "nemo-rl"
    openrlhf = "openrlhf"


class ReportShow(str, Enum):
    """What `--show` lists instead of the summary."""

    suspects = "suspects"


@handle_errors
def report(
    run: RunArg,
    format: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            "-f",
            help="table for people, json for machines, markdown for CI job summaries.",
        ),
    ] = ReportFormat.table,
    threshold: ThresholdOpt = 0.01,
    group_size: GroupSizeOpt = 8,
    fail_under_signal: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Exit 1 when the high-variance (learnable) share is below this fraction.",
        ),
    ] = None,
    max_error_rate: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="Exit 1 when more than this share of rollouts failed."),
    ] = None,
    price_in: Annotated[
        float | None,
        typer.Option(
            min=0.0, help="USD per million prompt tokens: show the run's cost.", show_default=False
        ),
    ] = None,
    price_out: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="USD per million completion tokens: show the run's cost.",
            show_default=False,
        ),
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option(
            "--group-by",
            metavar="COLUMN",
            help="Break every figure down by this column of the run's samples.parquet or of "
            "the score table \\[default: data_source, when present].",
            show_default=False,
        ),
    ] = None,
    trainer: Annotated[
        Trainer | None,
        typer.Option(
            "--trainer",
            help="Print dynamic-sampling settings for this trainer (with --train-batch-size) "
            "\\[default: verl].",
            show_default=False,
            rich_help_panel="Trainer settings",
        ),
    ] = None,
    train_batch_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Prompts (groups) per training step: plan dynamic sampling for it.",
            show_default=False,
            rich_help_panel="Trainer settings",
        ),
    ] = None,
    gen_batch_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Check this generation batch (prompts per round) instead of recommending one.",
            show_default=False,
            rich_help_panel="Trainer settings",
        ),
    ] = None,
    max_gen_batches: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Check this maximum number of generation rounds (0: no limit).",
            show_default=False,
            rich_help_panel="Trainer settings",
        ),
    ] = None,
    show: Annotated[
        ReportShow | None,
        typer.Option(
            "--show",
            help="List instead of summarising: suspects (samples whose rollouts agree on an "
            "answer graded wrong; a likely wrong reference).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Summarise pass rates, variance, pass@k and mixed-group odds; exit 1 if a check fails."""
    from curate.report.build import build_report

    built = build_report(
        run,
        threshold=threshold,
        group_size=group_size,
        fail_under_signal=fail_under_signal,
        max_error_rate=max_error_rate,
        price_in=price_in,
        price_out=price_out,
        group_by=group_by,
        # The list needs the check whatever the run's size; the summary checks if cheap.
        suspects=True if show is ReportShow.suspects else None,
        trainer=trainer.value if trainer is not None else None,
        train_batch_size=train_batch_size,
        gen_batch_size=gen_batch_size,
        max_gen_batches=max_gen_batches,
    )
    summary, checks, usage, name = built.summary, built.checks, built.usage, built.source
    suspects = built.suspects
    if show is ReportShow.suspects and suspects is not None:
        show_suspects(suspects, format, name)
    elif format is ReportFormat.json:
        from curate.report.render import render_json

        write_stdout(render_json(summary, checks, source=name, usage=usage, suspects=suspects))
    elif format is ReportFormat.markdown:
        from curate.report.render import render_markdown

        text = render_markdown(summary, checks, source=name, usage=usage, suspects=suspects)
        write_stdout(text)
        append_step_summary(text)
    else:
        from curate.report.render import render_table

        render_table(summary, checks, stdout_console(), source=name, usage=usage, suspects=suspects)
    if built.failed_checks:
        for g in built.failed_checks:
            print(f"curate: check failed: {g.name}: {g.message}", file=sys.stderr)
        raise typer.Exit(1)


def show_suspects(check: SuspectCheck, format: ReportFormat, name: str) -> None:
    """`--show suspects`: the flagged samples in `format` (or why there is no check)."""
    from curate.report import suspects as render

    if format is ReportFormat.json:
        write_stdout(render.render_suspects_json(check, source=name))
    elif format is ReportFormat.markdown:
        write_stdout(render.render_suspects_markdown(check, source=name))
    else:
        render.render_suspects_table(check, stdout_console(), source=name)


def append_step_summary(text: str) -> None:
    """Append the Markdown report to $GITHUB_STEP_SUMMARY when it is set. A file that
    cannot be written is a warning, not a failure: the report is on stdout already and
    the checks alone decide the exit status."""
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary_file:
        return
    try:
        with open(summary_file, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        print(
            f"curate: warning: GITHUB_STEP_SUMMARY={summary_file}: cannot append the "
            f"report ({reason}); the job summary is left without it",
            file=sys.stderr,
        )
