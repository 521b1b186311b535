"""The on-disk schema of a run directory: one place, used by every reader and writer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from curate.core.rollout import ROLLOUT_DTYPES

if TYPE_CHECKING:
    import polars as pl

MANIFEST_FILE: Final = "manifest.json"
SAMPLES_FILE: Final = "samples.parquet"
ROLLOUTS_DIR: Final = "rollouts"
FORMAT_VERSION: Final = 1

# Column name -> polars dtype name: the fields of the rollout record, in its order.
# Strings, so that importing this module does not import polars (`--help` stays light).
ROLLOUT_COLUMNS: Final[dict[str, str]] = ROLLOUT_DTYPES

# Columns added after the first release: older shards lack them, and readers see nulls.
LATE_ROLLOUT_COLUMNS: Final = ("raw_score", "reasoning", "reasoning_closed", "settled")

# Columns renamed since the first release: old name -> current name. Shards and tables written
# before a rename still read; every reader goes through `rollout_file_schema`/`scan_rollout_file`.
RENAMED_COLUMNS: Final[dict[str, str]] = {"run_idx": "rollout_idx"}

# The columns a bare score table must have; the rest are optional.
REQUIRED_SCORE_COLUMNS: Final = ("sample_id", "score")
OPTIONAL_SCORE_COLUMNS: Final = ("rollout_idx", "error")
# What a rollout spent, when the backend reported it (the report's usage section).
TOKEN_COLUMNS: Final = ("prompt_tokens", "completion_tokens")


def rollout_schema() -> dict[str, object]:
    """The explicit polars schema of a rollout shard."""
    import polars as pl

    return {name: getattr(pl, dtype) for name, dtype in ROLLOUT_COLUMNS.items()}


def current_names(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The renames that bring a file's columns to today's names (old present, new absent)."""
    have = set(names)
    return {old: new for old, new in RENAMED_COLUMNS.items() if old in have and new not in have}


def rollout_file_schema(path: Path) -> dict[str, pl.DataType]:
    """A Parquet file's column -> dtype, under today's column names."""
    import polars as pl

    schema = dict(pl.read_parquet_schema(path))
    renames = current_names(list(schema))
    return {renames.get(name, name): dtype for name, dtype in schema.items()}


def scan_rollout_file(path: Path) -> pl.LazyFrame:
    """A lazy scan of a Parquet file, under today's column names."""
    import polars as pl

    lf = pl.scan_parquet(path)
    try:
        renames = current_names(list(pl.read_parquet_schema(path)))
    except (pl.exceptions.PolarsError, OSError):
        return lf  # unreadable: the scan fails when collected, where the caller names the file
    return lf.rename(renames) if renames else lf


def with_current_names(frame: pl.LazyFrame) -> pl.LazyFrame:
    """`frame` (a table given by a user, in any format) under today's column names."""
    renames = current_names(frame.collect_schema().names())
    return frame.rename(renames) if renames else frame
