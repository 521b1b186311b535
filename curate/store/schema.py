"""The on-disk schema of a run directory: one place, used by every reader and writer."""

from __future__ import annotations

from typing import Final

from curate.core.rollout import ROLLOUT_DTYPES

MANIFEST_FILE: Final = "manifest.json"
SAMPLES_FILE: Final = "samples.parquet"
ROLLOUTS_DIR: Final = "rollouts"
FORMAT_VERSION: Final = 1

# Column name -> polars dtype name: the fields of the rollout record, in its order.
# Strings, so that importing this module does not import polars (`--help` stays light).
ROLLOUT_COLUMNS: Final[dict[str, str]] = ROLLOUT_DTYPES

# Columns added after the first release: older shards lack them, and readers see nulls.
LATE_ROLLOUT_COLUMNS: Final = (
    "raw_score",
    "reasoning",
    "reasoning_closed",
    "settled",
    "token_count_source",
    "logprob_mean",
    "entropy_mean",
    "confidence_mean",
    "confidence_lowest_group",
    "confidence_tail",
    "confidence_low_at",
    "confidence_low",
    "token_logprobs",
    "top_logprobs",
)

# The columns a bare score table must have; the rest are optional.
REQUIRED_SCORE_COLUMNS: Final = ("sample_id", "score")
OPTIONAL_SCORE_COLUMNS: Final = ("run_idx", "error")
# What a rollout spent, when the backend reported it (the report's usage section).
TOKEN_COLUMNS: Final = ("prompt_tokens", "completion_tokens")


def rollout_schema() -> dict[str, object]:
    """The explicit polars schema of a rollout shard."""
    return {name: polars_dtype(dtype) for name, dtype in ROLLOUT_COLUMNS.items()}


def polars_dtype(name: str) -> object:
    """The polars dtype a schema string names: "Float64", or "List(...)" of one."""
    import polars as pl

    if name.startswith("List(") and name.endswith(")"):
        return pl.List(polars_dtype(name[len("List(") : -1]))  # type: ignore[arg-type]
    return getattr(pl, name)
