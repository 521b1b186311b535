"""Turn errors into one line and an exit code (a traceback only with CURATE_DEBUG=1)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from curate.cli.output import silence_stdout
from curate.errors import CurateError, one_line

P = ParamSpec("P")
R = TypeVar("R")


def debug_enabled() -> bool:
    return os.environ.get("CURATE_DEBUG", "") not in ("", "0", "false", "no")


def fail(message: str, code: int) -> typer.Exit:
    """Print `curate: error: message` on stderr and return the Exit to raise."""
    print(f"curate: error: {message}", file=sys.stderr)
    return typer.Exit(code)


def _notes(exc: BaseException) -> str:
    """The exception's one-line notes, each as ' (note)' (e.g. where the engine log is)."""
    notes = getattr(exc, "__notes__", None) or []
    return "".join(f" ({note})" for note in notes if isinstance(note, str) and "\n" not in note)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator for commands: CurateError -> its exit code; anything else -> exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`curate ... | head`) before the command could say
            # how it ended: not a failure of ours (curate.cli.output keeps the status
            # where the command writes through it).
            silence_stdout()
            raise typer.Exit(0) from None
        except CurateError as exc:
            if debug_enabled():
                raise
            raise fail(str(exc) + _notes(exc), exc.exit_code) from None
        except KeyboardInterrupt as exc:
            if debug_enabled():
                raise
            # Not an error: the user stopped it. The message may say what was kept
            # (curate.evaluation.evaluate.Interrupted).
            print(f"curate: {str(exc) or 'interrupted'}", file=sys.stderr)
            raise typer.Exit(130) from None
        except Exception as exc:
            if debug_enabled():
                raise
            first = one_line(exc)
            raise fail(
                f"{type(exc).__name__}: {first}{_notes(exc)} "
                "(set CURATE_DEBUG=1 for the traceback)",
                1,
            ) from None

    return wrapper
