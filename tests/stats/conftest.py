"""Helpers for the statistics tests: build long-format rollout frames from score lists."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import polars as pl
import pytest

ERROR = None  # a failed rollout in a score list


def long_frame(samples: Mapping[str, Sequence[float | None]]) -> pl.DataFrame:
    """{sample_id: [score, ...]} -> rows (sample_id, run_idx, score, error); None = error row."""
    rows = []
    for sid, scores in samples.items():
        for i, score in enumerate(scores):
            error = "timeout" if score is None else None
            rows.append((sid, i, None if score is None else float(score), error))
    return pl.DataFrame(
        rows,
        schema={
            "sample_id": pl.String,
            "run_idx": pl.Int32,
            "score": pl.Float64,
            "error": pl.String,
        },
        orient="row",
    )


@pytest.fixture(scope="session")
def rollouts() -> Callable[[Mapping[str, Sequence[float | None]]], pl.DataFrame]:
    """Factory: `rollouts({"a": [1, 0, None]})` -> a long-format rollout frame."""
    return long_frame
