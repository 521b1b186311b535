"""The on-disk schema of a run directory: one place, used by every reader and writer."""

from __future__ import annotations

from typing import Final

MANIFEST_FILE: Final = "manifest.json"
SAMPLES_FILE: Final = "samples.parquet"
ROLLOUTS_DIR: Final = "rollouts"
FORMAT_VERSION: Final = 1

# Column name -> polars dtype name. Kept as strings so that importing this module
# does not import polars (the CLI's --help path must stay light).
ROLLOUT_COLUMNS: Final[dict[str, str]] = {
    "sample_id": "String",
    "run_idx": "Int32",
    "score": "Float64",  # null when `error` is set
    "error": "String",  # null for a scored rollout
    "completion": "String",
    "extracted": "String",  # what the grader compared against the reference
    "finish_reason": "String",  # "stop", "length", ...
    "truncated": "Boolean",  # finish_reason == "length": graded as is, flagged
    "prompt_tokens": "Int32",
    "completion_tokens": "Int32",
    "latency_s": "Float64",
    "seed": "Int64",
    "attempts": "Int32",  # requests made for this rollout (1 + retries)
}

# The columns a bare score table must have; the rest are optional.
REQUIRED_SCORE_COLUMNS: Final = ("sample_id", "score")
OPTIONAL_SCORE_COLUMNS: Final = ("run_idx", "error")


def rollout_schema() -> dict[str, object]:
    """The explicit polars schema of a rollout shard."""
    import polars as pl

    return {name: getattr(pl, dtype) for name, dtype in ROLLOUT_COLUMNS.items()}
