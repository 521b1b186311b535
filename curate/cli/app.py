"""The `curate` command. Command modules import only typer here; heavy libraries
load inside the commands, so `curate --help` stays fast."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from typing import Annotated

import typer

from curate import __version__
from curate.cli import agree as agree_cmd
from curate.cli import allocate as allocate_cmd
from curate.cli import compare as compare_cmd
from curate.cli import eval as eval_cmd
from curate.cli import filter as filter_cmd
from curate.cli import grade as grade_cmd
from curate.cli import ingest as ingest_cmd
from curate.cli import layouts as layouts_cmd
from curate.cli import plot as plot_cmd
from curate.cli import report as report_cmd
from curate.cli import status as status_cmd
from curate.cli import view as view_cmd
from curate.cli.aliases import current_spellings

# Help wider than this is hard to read on a wide terminal (rich fills the whole width):
# typer's TERMINAL_WIDTH caps it, never above the terminal's own width. A width the user
# sets in TERMINAL_WIDTH stands.
HELP_MAX_WIDTH = 100
if not os.environ.get("TERMINAL_WIDTH"):
    _columns = shutil.get_terminal_size((80, 24)).columns
    os.environ["TERMINAL_WIDTH"] = str(max(40, min(HELP_MAX_WIDTH, _columns)))

app = typer.Typer(
    name="curate",
    help=(
        "Find the prompts an RL run can learn from: run N baseline rollouts per sample, "
        "measure pass-rate variance, plot it, gate data sets in CI, export the learnable subset, "
        "and plan rollouts per sample."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"curate {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """curate: data-set curation for RL post-training."""


app.command("eval")(eval_cmd.eval_cmd)
app.command("report")(report_cmd.report)
app.command("plot")(plot_cmd.plot)
app.command("filter")(filter_cmd.filter_samples)
app.command("allocate")(allocate_cmd.allocate)
app.command("compare")(compare_cmd.compare)
app.command("ingest")(ingest_cmd.ingest)
app.command("status")(status_cmd.status)
app.command("grade")(grade_cmd.grade_cmd)
app.command("agree")(agree_cmd.agree)
app.command("layouts")(layouts_cmd.layouts)
app.command("view")(view_cmd.view)


# Commands that hold nothing needing teardown when they return (their files are
# written and renamed by then): the console script ends them with os._exit.
_FAST_EXIT_COMMANDS = frozenset(
    {
        "report",
        "plot",
        "filter",
        "allocate",
        "compare",
        "status",
        "ingest",
        "agree",
        "layouts",
        "view",
    }
)


def main() -> None:
    """The console script. After an analysis command it skips interpreter teardown,
    which frees every polars buffer and module one by one: time a CI check would pay
    on each call for nothing (benchmarks/bench_report.py prints how much)."""
    sys.argv[1:] = current_spellings(sys.argv[1:])
    try:
        app()
    except SystemExit as exc:
        code = exc.code
        if len(sys.argv) > 1 and sys.argv[1] in _FAST_EXIT_COMMANDS and _is_status(code):
            _exit_now(0 if code is None else int(code))
        raise


def _is_status(code: object) -> bool:
    return code is None or (isinstance(code, int) and not isinstance(code, bool))


def _exit_now(code: int) -> None:
    """Flush what the command printed, then end the process at once."""
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe: the reader left (`| head`); the command's status stands.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
