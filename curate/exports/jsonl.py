"""`jsonl`: every kept sample with its original fields and statistics, one JSON object a line."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from curate.exports.base import ExportBatch, ExportFormat, ExportResult, file_export


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    return file_export(output, stack, batch.rows.write_ndjson)


FORMAT = ExportFormat(
    name="jsonl",
    description="JSON Lines: original fields + statistics (the generic form)",
    output="jsonl",
    write=write,
    needs_prompts=False,
)
