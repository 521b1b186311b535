"""The one place that writes figures to disk (atomically) and frees them."""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from curate.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS: dict[str, str] = {".png": "png", ".svg": "svg", ".pdf": "pdf"}

# Drop timestamps and version strings so re-rendering the same data gives the same bytes.
_METADATA: dict[str, dict[str, str | None]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "Producer": None, "Creator": None},
}


def save_figure(fig: Figure, path: str | os.PathLike[str], *, dpi: int = 150) -> Path:
    """Write `fig` to `path` (format from the suffix: .png, .svg, .pdf) and close it.

    The file is written under a temporary name in the same directory and renamed into place,
    so `path` is either the complete new plot or untouched. The figure is freed whether or
    not writing succeeds; do not reuse it afterwards. Returns `path` as a Path.
    """
    target = Path(path)
    try:
        fmt = _format_of(target)
        _check_parent(target)
        _write_atomically(fig, target, fmt, dpi)
    finally:
        _close(fig)
    return target


def _format_of(target: Path) -> str:
    """The matplotlib format name for `target`'s suffix, or InputError."""
    suffix = target.suffix.lower()
    if suffix in FORMATS:
        return FORMATS[suffix]
    if not suffix:
        raise InputError("plot path has no format suffix (use .png, .svg or .pdf)", path=target)
    raise InputError(f"unknown plot format '{suffix}' (use .png, .svg or .pdf)", path=target)


def _check_parent(target: Path) -> None:
    """Refuse a missing parent directory: a typo there should fail, not grow a new tree."""
    parent = target.parent
    if not parent.exists():
        raise InputError(f"directory '{parent}' does not exist", path=target)
    if not parent.is_dir():
        raise InputError(f"'{parent}' is not a directory", path=target)
    if target.is_dir():
        raise InputError("is a directory, not a plot file", path=target)


def _write_atomically(fig: Figure, target: Path, fmt: str, dpi: int) -> None:
    """Render into a fresh sibling file, fsync it, then rename it over `target`."""
    from matplotlib import rc_context

    fd, tmp = _create_temp(target)
    try:
        # A fixed salt makes SVG element ids (clip paths, glyphs) the same from run to run.
        with os.fdopen(fd, "wb") as handle, rc_context({"svg.hashsalt": "curate"}):
            fig.savefig(handle, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _create_temp(target: Path) -> tuple[int, Path]:
    """Exclusively create a hidden temp file next to `target`.

    os.open with mode 0o666 lets the umask decide the permissions, so the renamed plot gets
    the same mode a plain open() would have given it (mkstemp would force 0o600).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"cannot write plot: {exc.strerror}", path=target) from exc


def _close(fig: Figure) -> None:
    """Free the figure's artists; also drop it from pyplot if someone made it there."""
    # Only touch pyplot if it is already loaded: importing it here would pick a GUI backend.
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)
    fig.clear()
