"""`parquet`: every kept sample with its original fields and statistics, as one Parquet file."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from curate.exports.base import ExportBatch, ExportFormat, ExportResult, file_export


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    return file_export(output, stack, batch.rows.write_parquet)


FORMAT = ExportFormat(
    name="parquet",
    description="Parquet: original fields + statistics (the generic form)",
    output="parquet",
    write=write,
    needs_prompts=False,
)
