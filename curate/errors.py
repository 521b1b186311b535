"""Errors that the CLI turns into one line and an exit code."""

from __future__ import annotations


class CurateError(Exception):
    """Base class: a problem the user can fix. `exit_code` is what the CLI returns."""

    exit_code = 2

    def __init__(self, message: str, *, path: object | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path is not None else message)


class InputError(CurateError):
    """Bad input: a missing file, a malformed table, an unknown format (exit 2)."""


class UsageError(CurateError):
    """Options that do not fit together (exit 2)."""


class RunError(CurateError):
    """A run that could not complete: engine failure, refused request (exit 1)."""

    exit_code = 1


class MissingExtraError(CurateError):
    """An optional dependency is not installed; the message names the pip command (exit 2)."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message on one line: its lines joined, cut at `limit` characters.

    Multi-line messages (pydantic, polars) keep their detail after the first line,
    which is often only a heading such as "1 validation error for ModelConfig".
    """
    lines = [" ".join(line.split()) for line in str(exc).strip().splitlines()]
    text = " | ".join(line for line in lines if line) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
