"""Atomic file writes: a temporary file in the target's directory, then a rename.

A reader never sees a half-written file, and an interrupted write leaves nothing
behind under the final name.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from curate.errors import InputError


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it over `target` on success."""
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("output directory does not exist", path=parent)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_text(target: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `target` atomically (UTF-8)."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
