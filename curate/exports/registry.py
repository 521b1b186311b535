"""Export formats by name: the one place `curate filter --format` looks them up.

The formats sit in the ground floor's `Registry` (as backends do): each is the
`FORMAT` of its module, imported when first asked for. `FORMATS` is a read-only
name -> format view of it, in registration order. Other packages add formats through
the ``curate.exports`` entry-point group: the entry point names an `ExportFormat`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path

from curate.core.registry import Registry
from curate.errors import UsageError
from curate.exports.base import ExportBatch, ExportFormat, ExportResult
from curate.store.tables import table_format


def _key(name: str) -> str:
    """Case-insensitive, and `_` may stand for `-` (openai_rft)."""
    return name.strip().lower().replace("_", "-")


REGISTRY: Registry[ExportFormat] = Registry(
    "format",
    normalise=_key,
    unknown=lambda name, names: f"unknown --format '{name}' (choose from {', '.join(names)})",
    group="curate.exports",
)
for _name, _module in (
    ("jsonl", "jsonl"),
    ("parquet", "parquet"),
    ("verl", "verl"),
    ("trl", "trl"),
    ("openrlhf", "openrlhf"),
    ("openai-rft", "openai_rft"),
):
    REGISTRY.add(_name, f"curate.exports.{_module}:FORMAT")


class _FormatView(Mapping[str, ExportFormat]):
    """The registered formats as a mapping (name -> format), loading each on access."""

    def __getitem__(self, name: str) -> ExportFormat:
        if name not in REGISTRY:
            raise KeyError(name)
        return REGISTRY.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY.names())

    def __len__(self) -> int:
        return len(REGISTRY.names())


FORMATS: Mapping[str, ExportFormat] = _FormatView()


def register(fmt: ExportFormat) -> None:
    """Add (or replace) a format under its name."""
    REGISTRY.register(fmt.name, fmt, help=fmt.description)


def format_names() -> list[str]:
    return REGISTRY.names()


def get_format(name: str) -> ExportFormat:
    """The format called `name` (case-insensitive; `_` may stand for `-`)."""
    return REGISTRY.get(name)


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
