"""Completion lengths by outcome and the truncation figures (`curate.stats.lengths`) of
a run or table: the one source of the report's `lengths` section and of
`curate plot --kind length`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curate.stats.lengths import length_summary
from curate.store.scores import excludes_truncated, read_lengths

if TYPE_CHECKING:
    import polars as pl

    from curate.store.manifest import RunManifest


@dataclass
class Lengths:
    """The section (`length_summary`) and the rows it came from (LENGTH_COLUMNS)."""

    section: dict[str, Any]
    rows: pl.DataFrame


def load_lengths(
    path: str | os.PathLike[str],
    manifest: RunManifest | None = None,
    *,
    rows: pl.DataFrame | None = None,
    samples_hint: int | None = None,
) -> Lengths | None:
    """Lengths and truncation of the input at `path` (None without token counts).
    `manifest` is the run's, when the caller has read it; `rows` the length rows when
    the caller's read already holds them (`ScoreRead.lengths`), `samples_hint` the
    number of samples with a counted rollout when the caller knows it."""
    if rows is None:
        rows = read_lengths(path)
    if rows is None or rows.height == 0:
        return None
    section = length_summary(
        rows,
        max_tokens=manifest.max_tokens if manifest is not None else None,
        excluded=excludes_truncated(manifest),
        samples_hint=samples_hint,
    )
    return Lengths(section=section, rows=rows)
