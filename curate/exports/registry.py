"""Export formats by name: the one place `curate filter --format` looks them up."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from curate.errors import UsageError
from curate.exports import jsonl, openai_rft, openrlhf, parquet, trl, verl
from curate.exports.base import ExportBatch, ExportFormat, ExportResult
from curate.store.tables import table_format

FORMATS: dict[str, ExportFormat] = {
    fmt.name: fmt
    for fmt in (
        jsonl.FORMAT,
        parquet.FORMAT,
        verl.FORMAT,
        trl.FORMAT,
        openrlhf.FORMAT,
        openai_rft.FORMAT,
    )
}


def register(fmt: ExportFormat) -> None:
    """Add (or replace) a format under its name."""
    FORMATS[fmt.name] = fmt


def format_names() -> list[str]:
    return list(FORMATS)


def get_format(name: str) -> ExportFormat:
    """The format called `name` (case-insensitive; `_` may stand for `-`)."""
    key = name.strip().lower().replace("_", "-")
    try:
        return FORMATS[key]
    except KeyError:
        raise UsageError(f"unknown --format '{name}' (choose from {', '.join(FORMATS)})") from None


def format_for_output(output: Path) -> ExportFormat:
    """The generic format named by the output's suffix (.jsonl or .parquet)."""
    fmt = table_format(output)  # an unknown suffix is an InputError naming the file
    if fmt == "csv":
        raise UsageError(f"{output}: filter writes .jsonl or .parquet (or use --format)")
    return FORMATS[fmt]


def write_export(
    fmt: ExportFormat | str,
    batch: ExportBatch,
    output: str | Path,
    *,
    stack: ExitStack | None = None,
) -> ExportResult:
    """Write `batch` as `fmt` to `output`, atomically.

    With `stack`, the renames into place happen when the caller closes it (so other
    files can join the same all-or-nothing write); without, before returning.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    output = Path(output)
    fmt.check_output(output)
    if stack is not None:
        return fmt.write(batch, output, stack)
    with ExitStack() as own:
        return fmt.write(batch, output, own)
