"""`curate status`: rollouts done and missing, per shard and overall (parse the
options, call `curate.analysis.status.run_status`, render). Exits 1 while anything is
missing, so a scheduler can wait on it; 0 once the run is complete."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.output import stdout_console, write_stdout

if TYPE_CHECKING:
    from curate.analysis.status import RunStatus

# The exit code while rollouts are missing (a usage or input error is 2).
INCOMPLETE_EXIT = 1


class StatusFormat(str, Enum):
    table = "table"
    json = "json"


@handle_errors
def status(
    run: Annotated[
        Path,
        typer.Argument(help="A run directory written by `curate eval`.", show_default=False),
    ],
    format: Annotated[
        StatusFormat,
        typer.Option("--format", "-f", help="table for people, json for machines."),
    ] = StatusFormat.table,
) -> None:
    """Rollouts done and missing per shard and overall; exit 1 while any is missing.

    A rollout whose error recurs on every re-run (settled) counts as done."""
    from curate.analysis.status import run_status

    result = run_status(run)
    if format is StatusFormat.json:
        write_stdout(json.dumps(result.as_dict(), indent=2) + "\n")
    else:
        render_status(result)
    if not result.complete:
        raise typer.Exit(INCOMPLETE_EXIT)


def render_status(result: RunStatus) -> None:
    """The table, then one line: complete, or what is missing."""
    from rich.table import Table

    console = stdout_console()
    table = Table(title=f"curate status: {result.run_dir}")
    columns = ("shard", "samples", "runs", "expected", "done", "settled", "missing", "errors")
    for name in (*columns, "writer"):
        table.add_column(name, justify="left" if name in ("shard", "writer") else "right")
    for part in [*result.shards, result.total]:
        table.add_row(
            part.shard or "all",
            f"{part.samples:,}",
            "mixed" if part.runs is None else str(part.runs),
            f"{part.expected:,}",
            f"{part.done:,}",
            f"{part.settled:,}",
            f"{part.missing:,}",
            f"{part.errors:,}",
            part.writer or "",
        )
    console.print(table)
    t = result.total
    # Settled errors are done: a re-run would fail them the same way, so it keeps them.
    settled = (
        f"; {t.settled:,} of them done with an error that recurs (settled, not retried; "
        f"see curate report {result.run_dir})"
        if t.settled
        else ""
    )
    if result.complete:
        write_stdout(f"complete: {t.done:,} of {t.expected:,} rollouts{settled}\n")
    else:
        waiting = [p.shard for p in result.shards if p.missing]
        where = f" (shards {', '.join(str(s) for s in waiting)})" if waiting else ""
        write_stdout(
            f"incomplete: {t.missing:,} of {t.expected:,} rollouts missing{where}, "
            f"{t.errors:,} of them errors (retried by re-running curate eval){settled}\n"
        )
