"""The outcome rule: the scalar and polars forms agree, and every consumer uses them."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curate.core.outcome import (
    CATEGORIES,
    LABELS,
    OUTCOMES,
    SHORT_LABELS,
    category_expr,
    category_of,
    outcome_expr,
    outcome_of_scores,
)
from curate.stats import aggregate_rollouts, analyze

score_lists = st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.6, 0.4, 1.0]), min_size=1, max_size=8)


def _row(scores: list[float]) -> dict[str, float | int]:
    n = len(scores)
    mean = sum(scores) / n
    return {
        "n_rollouts": n,
        "successes": sum(s >= 1.0 for s in scores),
        "best_score": max(scores),
        "worst_score": min(scores),
        "mean_score": mean,
        "variance": sum((s - mean) ** 2 for s in scores) / n,
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(score_lists, min_size=1, max_size=20), st.sampled_from([0.0, 0.01, 0.04, 0.25]))
def test_scalar_and_polars_forms_agree(samples: list[list[float]], threshold: float) -> None:
    rows = [_row(s) for s in samples]
    frame = pl.DataFrame(rows)
    got = frame.select(category_expr(threshold).alias("c"), outcome_expr().alias("o")).to_dict(
        as_series=False
    )
    for scores, row, cat, out in zip(samples, rows, got["c"], got["o"], strict=True):
        assert cat == category_of(
            row["n_rollouts"],
            row["successes"],
            row["best_score"],
            row["mean_score"],
            row["variance"],
            threshold,
        )
        assert out == outcome_of_scores(scores)
        # Categories refine outcomes.
        assert (out == "mixed") == (cat in ("high_variance", "low_variance"))
    # Without the worst score the rule reads "all passed" off the spread.
    no_worst = frame.select(category_expr(threshold, worst=None).alias("c"))["c"].to_list()
    assert no_worst == got["c"]


def test_statistics_use_the_rule() -> None:
    rollouts = pl.DataFrame(
        {
            "sample_id": ["a"] * 4 + ["b"] * 4 + ["c"] * 4 + ["d"] * 2,
            "rollout_idx": [0, 1, 2, 3] * 3 + [0, 1],
            "score": [1.0] * 4 + [0.0] * 4 + [1.0, 0.0, 1.0, 0.0] + [0.4, 0.6],
            "error": [None] * 14,
        },
        schema_overrides={"error": pl.String},
    )
    per_sample = analyze(rollouts).per_sample.sort("sample_id")
    assert per_sample["category"].to_list() == [
        "always_correct",
        "always_incorrect",
        "high_variance",
        "low_variance",  # variance 0.01: at the threshold, not above it
    ]
    agg = aggregate_rollouts(rollouts)
    assert set(agg.columns) >= {"n_rollouts", "best_score", "worst_score"}


def test_a_variance_at_the_threshold_is_not_above_it() -> None:
    # [0.4, 0.6]: population variance 0.01 up to rounding.
    assert category_of(2, 0, 0.6, 0.5, 0.010000000000000002, 0.01) == "low_variance"


def test_one_vocabulary() -> None:
    for name in (*OUTCOMES, *CATEGORIES):
        assert name in LABELS and name in SHORT_LABELS
    words = " ".join(LABELS.values()) + " " + " ".join(SHORT_LABELS.values())
    assert "right" not in words and "wrong" not in words


@pytest.mark.parametrize(
    ("scores", "outcome"),
    [
        ([1.0, 1.0], "always_correct"),
        ([0.0], "always_incorrect"),
        ([0.5, 0.5], "mixed"),
        ([], None),
    ],
)
def test_outcome_of_scores(scores: list[float], outcome: str | None) -> None:
    assert outcome_of_scores(scores) == outcome
