"""A small per-sample frame covering every category, for the filtering tests."""

from __future__ import annotations

import polars as pl
import pytest

from curate.stats import sample_stats
from tests.conftest import long_frame

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
    return sample_stats(long_frame(SCORES))
