"""Token confidence against the grade (`curate.stats.confidence`): the one source of the
report's `confidence` section, and how a run's token counts were made."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.deepen import descriptive_rows
from curate.core.rollout import TOKEN_COUNT_SOURCES
from curate.stats.confidence import LOW, LOW_AT, SUMMARY_COLUMNS, confidence_section
from curate.store.run_dir import RolloutStore, is_run_dir

if TYPE_CHECKING:
    import polars as pl

# What the section reads of each rollout (no text, no per-token arrays).
CONFIDENCE_COLUMNS = (
    "sample_id",
    "rollout_idx",
    "score",
    "error",
    "completion_tokens",
    *SUMMARY_COLUMNS,
    LOW_AT,
    LOW,
)


def _store(path: str | os.PathLike[str]) -> RolloutStore | None:
    path = Path(path)
    if not path.is_dir() or not is_run_dir(path):
        return None
    store = RolloutStore(path)
    return store if store.shard_paths() else None


def _rows(store: RolloutStore, manifest: dict[str, Any], columns: list[str]) -> pl.DataFrame:
    """`columns` of the run's descriptive rows: a deepened run's first N rollouts of each
    sample, as the other statistics read them."""
    first_n = descriptive_rows(manifest)
    frame = store.rollouts([*columns, "rollout_idx"] if first_n is not None else columns)
    return frame if first_n is None else frame.filter(first_n)


def _manifest(store: RolloutStore) -> dict[str, Any]:
    manifest = store.read_manifest() if store.exists() else {}
    return manifest if isinstance(manifest, dict) else {}


def load_confidence(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The `confidence` section of the run at `path`; None for a bare table or a run
    whose rollouts have no confidence summaries (made without --logprobs)."""
    store = _store(path)
    if store is None:
        return None
    manifest = _manifest(store)
    sampling = manifest.get("sampling")
    if not isinstance(sampling, dict) or sampling.get("logprobs") is None:
        return None
    section = confidence_section(_rows(store, manifest, list(CONFIDENCE_COLUMNS)))
    if section is not None:
        section["logprobs"] = sampling.get("logprobs")
        section["window"] = sampling.get("confidence_window")
    return section


def token_count_sources(path: str | os.PathLike[str]) -> dict[str, int] | None:
    """How many rollouts of the run at `path` have token counts made each way
    (TOKEN_COUNT_SOURCES, plus `unknown` for rows written before it was recorded);
    None for a bare table."""
    store = _store(path)
    if store is None:
        return None
    frame = _rows(store, _manifest(store), ["token_count_source", "completion_tokens"])
    frame = frame.filter(frame["completion_tokens"].is_not_null())
    counts = {name: 0 for name in (*TOKEN_COUNT_SOURCES, "unknown")}
    for value in frame["token_count_source"].to_list():
        counts[value if value in counts else "unknown"] += 1
    return counts
