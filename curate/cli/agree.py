"""`curate agree`: how two graders of the same rollouts agree."""

from __future__ import annotations

from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import RunArg
from curate.cli.report import ReportFormat


@handle_errors
def agree(
    run: RunArg,
    other: Annotated[
        str,
        typer.Argument(
            help="The same rollouts graded another way: `curate grade RUN --out RUN2`'s "
            "RUN2, or a score table.",
            metavar="RUN2",
            show_default=False,
        ),
    ],
    format: Annotated[
        ReportFormat,
        typer.Option("--format", "-f", help="Output format.", case_sensitive=False),
    ] = ReportFormat.table,
) -> None:
    """Compare two graders: confusion table, Cohen's kappa, Spearman, changed outcomes."""
    from curate.analysis.agreement import load_agreement
    from curate.cli.output import stdout_console, write_stdout

    result = load_agreement(run, other)
    if format is ReportFormat.json:
        from curate.report.agreement import render_agreement_json

        write_stdout(render_agreement_json(result))
    elif format is ReportFormat.markdown:
        from curate.report.agreement import render_agreement_markdown

        write_stdout(render_agreement_markdown(result))
    else:
        from curate.report.agreement import render_agreement_table

        render_agreement_table(result, stdout_console())
