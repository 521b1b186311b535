"""Writing to stdout when the reader may leave early (`curate report RUN | head`).

A closed pipe is the reader's choice, not a failure: the rest of the output goes to
/dev/null and the command ends with its own status (a failed check still exits 1, a
passed one 0), instead of a traceback or rich's blanket exit 1.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def silence_stdout() -> None:
    """Point stdout at /dev/null, so later writes and the final flush stay quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def write_stdout(text: str) -> None:
    """`sys.stdout.write(text)` and a flush; a closed pipe silences stdout instead of raising."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def stdout_console() -> Console:
    """A rich console on stdout that survives a closed pipe the same way."""
    from rich.console import Console

    class _PipeSafeConsole(Console):
        def on_broken_pipe(self) -> None:
            silence_stdout()

    return _PipeSafeConsole()
