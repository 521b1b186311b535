"""`parquet`: every kept sample with its original fields and statistics, as one Parquet file."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from curate.exports.base import ExportBatch, ExportFormat, ExportResult
from curate.store.atomic import atomic_path


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    tmp = stack.enter_context(atomic_path(output))
    batch.rows.write_parquet(tmp)
    return ExportResult(paths=[output])


FORMAT = ExportFormat(
    name="parquet",
    description="Parquet: original fields + statistics (the generic form)",
    output="parquet",
    write=write,
    needs_prompts=False,
)
