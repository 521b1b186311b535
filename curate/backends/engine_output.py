"""Keep the terminal for curate: an engine's own output goes to a log file.

vLLM, torch and their worker processes write notices straight to file descriptors 1
and 2 (Triton and NUMA notices, weight-loading warnings, shutdown messages), which
buries curate's progress and summary. While `engine_output_to(path)` is open, both
descriptors point at the log file, so everything that writes to them, child processes
included, lands there; curate's own `sys.stdout`/`sys.stderr` are re-opened on the
original terminal and keep working as before. Python warnings go to the log too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def engine_output_to(log_path: Path | None) -> Iterator[Path | None]:
    """Send fds 1 and 2 to `log_path` (appended) until the block ends; None: no capture."""
    if log_path is None:
        yield None
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    old_streams = (sys.stdout, sys.stderr)
    old_showwarning = warnings.showwarning
    log = os.fdopen(os.dup(log_fd), "a", buffering=1, encoding="utf-8", errors="replace")
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        sys.stdout = _reopen(saved[1], old_streams[0])
        sys.stderr = _reopen(saved[2], old_streams[1])

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
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        warnings.showwarning = old_showwarning
        sys.stdout, sys.stderr = old_streams
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(log_fd)
        log.close()


def _reopen(fd: int, like: IO[str]) -> IO[str]:
    """A text stream on `fd` (not closing it) with the encoding of the stream it replaces."""
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
