"""A small per-sample frame covering every category, for the filtering tests."""

from __future__ import annotations

import polars as pl
import pytest

from curate.stats import sample_stats

SCORES: dict[str, list[float | None]] = {
    "hv1": [1, 0, 1, 0],  # high variance, pass rate 0.5
    "hv2": [1, 0, 0, 0],  # high variance, pass rate 0.25
    "right": [1, 1, 1, 1],  # always correct
    "wrong": [0, 0, 0, 0],  # always incorrect
    "flat": [0.5, 0.5, 0.5, 0.5],  # low variance (partial credit)
    "dead": [None, None],  # every rollout failed
}


@pytest.fixture
def per_sample() -> pl.DataFrame:
    rows = [
        (sid, i, score, "boom" if score is None else None)
        for sid, scores in SCORES.items()
        for i, score in enumerate(scores)
    ]
    frame = pl.DataFrame(
        rows,
        schema={
            "sample_id": pl.String,
            "run_idx": pl.Int32,
            "score": pl.Float64,
            "error": pl.String,
        },
        orient="row",
    )
    return sample_stats(frame)
