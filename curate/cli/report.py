"""`curate report`: the data-set summary, and CI gates on it."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


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
) -> None:
    """Summarise pass rates, variance, pass@k and the gate odds; exit 1 if a gate fails."""
    from curate.report.gates import evaluate_gates
    from curate.stats.analysis import analyze
    from curate.store.scores import load_aggregated

    # The report needs per-sample aggregates only: one pass over the file, no rows kept.
    source = load_aggregated(run, compress=True)
    adaptive = bool(source.manifest and source.manifest.get("adaptive"))
    analysis = analyze(
        source.rollouts,
        threshold=threshold,
        group_size=group_size,
        adaptive=adaptive,
        aggregate=source.aggregate,
    )
    gates = evaluate_gates(
        analysis.summary, fail_under_signal=fail_under_signal, max_error_rate=max_error_rate
    )
    name = str(run)
    from curate.stats.usage import report_usage

    # Token counts (and cost, given prices) when the input has them; else no section.
    usage = report_usage(run, price_in, price_out)
    if format is ReportFormat.json:
        from curate.report.render import render_json

        sys.stdout.write(render_json(analysis.summary, gates, source=name, usage=usage))
    elif format is ReportFormat.markdown:
        from curate.report.render import render_markdown

        text = render_markdown(analysis.summary, gates, source=name, usage=usage)
        sys.stdout.write(text)
        summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_file:
            with open(summary_file, "a", encoding="utf-8") as fh:
                fh.write(text)
    else:
        from rich.console import Console

        from curate.report.render import render_table

        render_table(analysis.summary, gates, Console(), source=name, usage=usage)
    failed = [g for g in gates if not g.passed]
    if failed:
        for g in failed:
            print(f"curate: gate failed: {g.name}: {g.message}", file=sys.stderr)
        raise typer.Exit(1)
