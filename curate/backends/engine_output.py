"""Keep the terminal for curate: an engine's own output goes to a log file.

vLLM, torch and their worker processes write notices straight to file descriptors 1
and 2 (Triton and NUMA notices, weight-loading warnings, shutdown messages), which
buries curate's progress and summary. While `engine_output_to(path)` is open, both
descriptors point at the log file, so everything that writes to them, child processes
included, lands there; curate's own `sys.stdout`/`sys.stderr` are re-opened on the
original terminal and keep working as before. Python warnings go to the log too.

A library that binds `sys.stdout` when it is imported or configured (vLLM's log
handler, a `print` at import) would bind curate's terminal stream instead: start and
stop an engine inside `with engine_streams():` (or hand its context manager to
`entered_quietly`), where `sys.stdout`/`sys.stderr` are the streams on fds 1 and 2.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")

# The streams on fds 1 and 2 of each open capture, innermost last (see engine_streams).
_CAPTURED: list[tuple[IO[str], IO[str]]] = []


@contextlib.contextmanager
def engine_output_to(log_path: Path | None) -> Iterator[Path | None]:
    """Send fds 1 and 2 to `log_path` (appended) until the block ends; None: no capture."""
    if log_path is None:
        yield None
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    flush_std_streams()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    old_streams = (sys.stdout, sys.stderr)
    old_showwarning = warnings.showwarning
    log = os.fdopen(os.dup(log_fd), "a", buffering=1, encoding="utf-8", errors="replace")
    engine: tuple[IO[str], IO[str]] | None = None
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        sys.stdout = _reopen(saved[1], old_streams[0], 1)
        sys.stderr = _reopen(saved[2], old_streams[1], 2)
        engine = (_on_fd(old_streams[0], 1), _on_fd(old_streams[1], 2))
        _CAPTURED.append(engine)

        def to_log(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: IO[str] | None = None,
            line: str | None = None,
        ) -> None:
            log.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = to_log
        yield log_path
    finally:
        if _CAPTURED and _CAPTURED[-1] is engine:
            _CAPTURED.pop()
        flush_std_streams()
        warnings.showwarning = old_showwarning
        sys.stdout, sys.stderr = old_streams
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(log_fd)
        log.close()


@contextlib.contextmanager
def engine_streams() -> Iterator[None]:
    """Inside `engine_output_to`: `sys.stdout`/`sys.stderr` write to the log (the streams
    on fds 1 and 2) until the block ends. Outside one: nothing changes."""
    if not _CAPTURED:
        yield
        return
    mine = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = _CAPTURED[-1]
    try:
        yield
    finally:
        flush_std_streams()
        sys.stdout, sys.stderr = mine


@contextlib.contextmanager
def entered_quietly(manager: AbstractContextManager[T]) -> Iterator[T]:
    """`manager`, entered and left under `engine_streams()` (an engine's start and stop
    print, and configure their loggers, to the log); its body keeps curate's streams."""
    with engine_streams():
        value = manager.__enter__()
    try:
        yield value
    except BaseException:
        with engine_streams():
            if not manager.__exit__(*sys.exc_info()):
                raise
    else:
        with engine_streams():
            manager.__exit__(None, None, None)


def flush_std_streams() -> None:
    """Flush sys.stdout and sys.stderr; a closed or broken stream is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _on_fd(stream: IO[str], fd: int) -> IO[str]:
    """`stream` if it writes to `fd`, else a new text stream on `fd` (left open: a
    logger configured under engine_streams keeps it)."""
    if _fileno(stream) == fd:
        return stream
    return open(fd, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)


def _fileno(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return None


def _reopen(fd: int, like: IO[str], original_fd: int) -> IO[str]:
    """A text stream on `fd` (not closing it) with the encoding of the stream it replaces;
    a stream not on `original_fd` (a test runner's buffer) does not write to the log, so
    it stays as it is."""
    if _fileno(like) != original_fd:
        return like
    encoding = getattr(like, "encoding", None) or "utf-8"
    errors = getattr(like, "errors", None) or "strict"
    return open(fd, "w", buffering=1, encoding=encoding, errors=errors, closefd=False)


def log_tail(log_path: Path, lines: int = 20) -> str:
    """The last `lines` lines of an engine log, for a failure message ('' if unreadable)."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
