"""Completion lengths by outcome, truncation and the recommended max_tokens, on
frames small enough to check by hand."""

from __future__ import annotations

import polars as pl

from curate.stats.lengths import length_summary, length_warnings, nearest_rank


def _rows() -> pl.DataFrame:
    # a: right at 10..100 (10 rollouts); b: 3 of 4 cut short at 200, one wrong at 50;
    # c: a failed rollout (left out) and a wrong one at 20.
    right = list(range(10, 101, 10))
    return pl.DataFrame(
        {
            "sample_id": ["a"] * 10 + ["b"] * 4 + ["c"] * 2,
            "score": [1.0] * 10 + [0.0, 0.0, 1.0, 0.0] + [None, 0.0],
            "error": [None] * 14 + ["boom", None],
            "truncated": [False] * 10 + [True, True, True, False] + [None, False],
            "completion_tokens": [*right, 200, 200, 200, 50, None, 20],
        }
    )


def test_nearest_rank() -> None:
    values = pl.Series(range(1, 101))
    assert nearest_rank(values, 0.99) == 99
    assert nearest_rank(values, 0.5) == 50
    assert nearest_rank(pl.Series([7]), 0.99) == 7
    assert nearest_rank(pl.Series([], dtype=pl.Int64), 0.99) is None


def test_length_summary_by_hand() -> None:
    s = length_summary(_rows(), max_tokens=200)
    assert (s["rollouts"], s["truncated"]) == (15, 3)  # the failed rollout is left out
    assert s["truncation_rate"] == 3 / 15
    tokens = s["completion_tokens"]
    assert tokens["right"] == {"rollouts": 10, "p50": 50, "p90": 90, "p99": 100, "max": 100}
    assert tokens["wrong"] == {"rollouts": 2, "p50": 20, "p90": 50, "p99": 50, "max": 50}
    # A cut-short rollout counts as truncated even when it scored 1 as it stood.
    assert tokens["truncated"]["rollouts"] == 3 and tokens["truncated"]["max"] == 200
    # 99% of right answers finish within 100 tokens; 3 of 15 measured rollouts exceed it.
    assert s["recommended_max_tokens"] == 100
    assert s["recommended_cut_share"] == 3 / 15
    assert s["recommended_is_lower_bound"] is True
    assert s["per_sample_truncation_rate"] == {"mean": 0.75 / 3, "max": 0.75}
    assert s["samples_with_truncation"] == 1
    assert s["mostly_truncated_samples"] == 1 and s["mostly_truncated_ids"] == ["b"]
    assert s["mostly_truncated_never_right"] == 1
    assert s["max_tokens"] == 200 and s["excluded_from_statistics"] is False


def test_warnings_above_five_percent_and_for_mostly_truncated_samples() -> None:
    warnings = length_warnings(length_summary(_rows()))
    assert warnings[0].startswith("20.0% of rollouts were cut short")
    assert "right answers finish within 100 tokens (p99)" in warnings[0]
    assert warnings[1].startswith("1 sample had most rollouts cut short")
    clean = _rows().with_columns(pl.lit(False).alias("truncated"))
    assert length_warnings(length_summary(clean)) == []


def test_no_right_answer_no_recommendation() -> None:
    rows = _rows().with_columns(pl.lit(0.0).alias("score"))
    s = length_summary(rows)
    assert s["recommended_max_tokens"] is None and s["recommended_cut_share"] is None
    assert "raise --max-tokens" in length_warnings(s)[0]
