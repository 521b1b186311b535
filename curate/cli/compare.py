"""`curate compare`: runs of the same samples under different models or checkpoints
(parse the options, call `curate.report.compare.build_comparison`, render it)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, ThresholdOpt
from curate.cli.output import stdout_console, write_stdout
from curate.cli.report import ReportFormat, append_step_summary


class ComparePlot(str, Enum):
    evolution = "evolution"
    matrix = "matrix"


@handle_errors
def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_A RUN_B [RUN_C ...]",
            help="Runs of the same samples (run directories or score tables), in training "
            "order; samples are matched by sample_id. The first and the last are compared "
            "sample by sample.",
            show_default=False,
        ),
    ],
    format: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            "-f",
            help="table for people, json for machines, markdown for CI job summaries.",
        ),
    ] = ReportFormat.table,
    alpha: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Significance level of the per-sample test of change (learned, forgotten).",
        ),
    ] = 0.05,
    fail_on_forgotten: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="F",
            help="Exit 1 when more than this share of the samples fell significantly "
            "(forgotten) from the first run to the last.",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        ComparePlot | None,
        typer.Option(
            "--plot",
            help="Also draw a figure (needs -o): evolution (mean score, best-of-N, "
            "high-variance share, mixed groups per run) or matrix (pass rate per sample "
            "and run, sorted and binned).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Where --plot writes its figure (.png, .svg or .pdf).",
            show_default=False,
        ),
    ] = None,
    per_sample: Annotated[
        Path | None,
        typer.Option(
            "--per-sample",
            metavar="TABLE",
            help="Write the per-sample comparison (pass rates with intervals, outcomes, "
            "p-value, sets) to a .parquet, .csv or .jsonl table.",
            show_default=False,
        ),
    ] = None,
    threshold: ThresholdOpt = 0.01,
    group_size: GroupSizeOpt = 8,
) -> None:
    """Compare runs of the same samples: transitions, learned/forgotten, pass@k, evolution."""
    from curate.errors import UsageError
    from curate.report.compare import build_comparison

    if plot is not None and output is None:
        raise UsageError("--plot needs -o FILE (.png, .svg or .pdf)")
    if output is not None and plot is None:
        raise UsageError("-o names the --plot figure; pass --plot evolution or --plot matrix")
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"--alpha must be between 0 and 1 (got {alpha:g})")
    # Output names are checked before anything is read: a typo costs no work.
    if per_sample is not None:
        from curate.store.tables import table_format

        table_format(per_sample)
    if output is not None:
        from curate.plots.save import FORMATS

        if output.suffix.lower() not in FORMATS:
            raise UsageError(f"{output}: --plot writes .png, .svg or .pdf")
    built = build_comparison(
        runs,
        alpha=alpha,
        group_size=group_size,
        threshold=threshold,
        fail_on_forgotten=fail_on_forgotten,
    )
    if per_sample is not None:
        from curate.analysis.compare import per_sample_table
        from curate.store.tables import write_table

        write_table(per_sample_table(built.comparison), per_sample)
        print(f"per-sample comparison -> {per_sample}", file=sys.stderr)
    if plot is not None and output is not None:
        from curate.plots.compare import comparison_figure
        from curate.plots.save import save_figure

        save_figure(comparison_figure(built.comparison, plot.value), output)
        print(f"{plot.value} plot -> {output}", file=sys.stderr)
    if format is ReportFormat.json:
        from curate.report.compare import render_comparison_json

        write_stdout(render_comparison_json(built))
    elif format is ReportFormat.markdown:
        from curate.report.compare import render_comparison_markdown

        text = render_comparison_markdown(built)
        write_stdout(text)
        append_step_summary(text)
    else:
        from curate.report.compare import render_comparison_table

        render_comparison_table(built, stdout_console())
    if built.failed_checks:
        for g in built.failed_checks:
            print(f"curate: check failed: {g.name}: {g.message}", file=sys.stderr)
        raise typer.Exit(1)
