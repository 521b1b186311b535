"""`jsonl`: every kept sample with its original fields and statistics, one JSON object a line."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from curate.exports.base import ExportBatch, ExportFormat, ExportResult
from curate.store.atomic import atomic_path


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    tmp = stack.enter_context(atomic_path(output))
    batch.rows.write_ndjson(tmp)
    return ExportResult(paths=[output])


FORMAT = ExportFormat(
    name="jsonl",
    description="JSON Lines: original fields + statistics (the generic form)",
    output="jsonl",
    write=write,
    needs_prompts=False,
)
