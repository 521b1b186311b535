"""Atomic writes: a temporary file (or directory) in the target's directory, then a rename.

A reader never sees a half-written file, and an interrupted write leaves nothing
behind under the final name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from curate.errors import InputError


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `target`; rename it over `target` on success."""
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("output directory does not exist", path=parent)
    tmp = _temp_beside(target, ".tmp", directory=False)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _temp_beside(target: Path, suffix: str, *, directory: bool) -> Path:
    """Create a new hidden file or directory next to `target`.

    Created with mode 0o666 / 0o777 so that the umask decides the permissions: the
    renamed output gets the mode a plain open() or mkdir() would have given it
    (mkstemp and mkdtemp would force 0o600 / 0o700).
    """
    while True:
        # os.urandom rather than `secrets`, whose import (hmac, hashlib) costs ~5 ms a call.
        tmp = target.with_name(f".{target.name}.{os.urandom(6).hex()}{suffix}")
        try:
            if directory:
                os.mkdir(tmp, 0o777)
            else:
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def atomic_write_text(target: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `target` atomically (UTF-8)."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_dir(
    target: str | os.PathLike[str], *, may_replace: Callable[[Path], bool] | None = None
) -> Iterator[Path]:
    """Yield an empty temporary directory beside `target`; swap it in on success.

    An existing `target` is replaced only when it is empty or `may_replace(target)`
    says it is an earlier output of the same kind: a mistyped `-o ~` must never be
    deleted. The old directory is moved aside before the new one is renamed in and
    removed after, so `target` is never a half-written directory.
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("output directory does not exist", path=parent)
    if target.exists() or target.is_symlink():
        if not target.is_dir() or target.is_symlink():
            raise InputError("exists and is not a directory", path=target)
        if any(target.iterdir()) and not (may_replace and may_replace(target)):
            raise InputError(
                "directory exists and was not written by this export; "
                "remove it or choose another output",
                path=target,
            )
    tmp = _temp_beside(target, ".tmp", directory=True)
    try:
        yield tmp
        if target.exists():
            old = _temp_beside(target, ".old", directory=True)
            try:
                os.replace(target, old)  # `old` is empty, so a directory rename may replace it
            except BaseException:
                old.rmdir()
                raise
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
