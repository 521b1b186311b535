"""Parity with the variance-plot method's metric definitions on random score matrices.

`seed_metrics` restates the reference method with numpy, one sample at a time, the way
the seed computes it: np.mean / np.max / np.min / np.var / np.std per sample, its three
category predicates, and the improvement-potential averages. curate computes the same
numbers with polars aggregations; they must agree.

One documented difference: a variance that equals the threshold in exact arithmetic
(e.g. scores [0.4, 0.6] against 0.01) is "above" it or not depending on rounding in
np.var; curate treats anything within 1e-12 as equal (not above). Samples whose numpy
variance lies within 1e-9 of the threshold are therefore left out of the category check.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curate.stats import analyze

AMBIGUOUS = 1e-9


def seed_metrics(matrix: Sequence[Sequence[float]], threshold: float) -> dict:
    """The variance-plot method's definitions, restated: per-sample stats, category
    counts, potential."""
    per_sample = []
    for scores in matrix:
        values = np.asarray(scores, dtype=np.float64)
        per_sample.append(
            {
                "mean": float(np.mean(values)),
                "best": float(np.max(values)),
                "worst": float(np.min(values)),
                "var": float(np.var(values)),  # population variance (ddof = 0)
                "std": float(np.std(values)),
            }
        )
    for m in per_sample:
        m["high_variance"] = m["var"] > threshold and 0.0 < m["mean"] < 1.0
        m["always_correct"] = m["best"] == 1.0 and m["var"] == 0
        m["always_incorrect"] = m["best"] == 0.0
        m["ambiguous"] = abs(m["var"] - threshold) < AMBIGUOUS
    current = float(np.mean([m["mean"] for m in per_sample]))
    best_avg = float(np.mean([m["best"] for m in per_sample]))
    return {
        "per_sample": per_sample,
        "high_variance": sum(m["high_variance"] for m in per_sample),
        "always_correct": sum(m["always_correct"] for m in per_sample),
        "always_incorrect": sum(m["always_incorrect"] for m in per_sample),
        "current": current,
        "best_of_n": best_avg,
        "potential_gain": best_avg - current,
    }


def to_frame(matrix: Sequence[Sequence[float]]) -> pl.DataFrame:
    rows = [
        (f"s{i:05d}", j, float(x)) for i, scores in enumerate(matrix) for j, x in enumerate(scores)
    ]
    frame = pl.DataFrame(
        rows,
        schema={"sample_id": pl.String, "rollout_idx": pl.Int32, "score": pl.Float64},
        orient="row",
    )
    return frame.with_columns(pl.lit(None, dtype=pl.String).alias("error"))


def assert_parity(matrix: Sequence[Sequence[float]], threshold: float) -> None:
    ref = seed_metrics(matrix, threshold)
    analysis = analyze(to_frame(matrix), threshold=threshold)
    ours = analysis.per_sample.sort("sample_id")
    assert ours.height == len(matrix)
    for m, r in zip(ref["per_sample"], ours.iter_rows(named=True), strict=True):
        assert r["mean_score"] == pytest.approx(m["mean"], abs=1e-9)
        assert r["best_score"] == m["best"]
        assert r["worst_score"] == m["worst"]
        assert r["variance"] == pytest.approx(m["var"], abs=1e-9)
        assert r["std_dev"] == pytest.approx(m["std"], abs=1e-7)
        if m["ambiguous"]:
            continue
        expected = (
            "always_correct"
            if m["always_correct"]
            else "always_incorrect"
            if m["always_incorrect"]
            else "high_variance"
            if m["high_variance"]
            else "low_variance"
        )
        assert r["category"] == expected, (m, r)

    s = analysis.summary
    assert s.samples == len(matrix)
    clear = [m for m in ref["per_sample"] if not m["ambiguous"]]
    if len(clear) == len(matrix):
        assert s.categories["high_variance"] == ref["high_variance"]
        assert s.categories["always_correct"] == ref["always_correct"]
        assert s.categories["always_incorrect"] == ref["always_incorrect"]
        assert s.high_variance_fraction == pytest.approx(ref["high_variance"] / len(matrix))
    assert sum(s.categories.values()) == len(matrix)
    assert s.mean_score == pytest.approx(ref["current"], abs=1e-9)
    assert s.best_of_n == pytest.approx(ref["best_of_n"], abs=1e-9)
    assert s.potential_gain == pytest.approx(ref["potential_gain"], abs=1e-9)
    if ref["current"] > 1e-9:
        assert s.relative_gain == pytest.approx(ref["potential_gain"] / ref["current"], rel=1e-6)


binary_score = st.sampled_from([0.0, 1.0])
grid_score = st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0])
partial_score = st.one_of(grid_score, st.floats(0.0, 1.0, allow_nan=False))
thresholds = st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.2])


def matrices(score: st.SearchStrategy[float]) -> st.SearchStrategy[list[list[float]]]:
    return st.lists(st.lists(score, min_size=1, max_size=10), min_size=1, max_size=30)


SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(matrix=matrices(binary_score), threshold=thresholds)
def test_parity_binary_matrices(matrix: list[list[float]], threshold: float) -> None:
    assert_parity(matrix, threshold)


@SETTINGS
@given(matrix=matrices(partial_score), threshold=thresholds)
def test_parity_partial_credit_matrices(matrix: list[list[float]], threshold: float) -> None:
    assert_parity(matrix, threshold)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_large_random_binary(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 0.5, size=2000)
    matrix = [list((rng.random(3) < q).astype(float)) for q in p]  # the seed's 3 runs
    assert_parity(matrix, 0.01)


@pytest.mark.parametrize("seed", [3, 4])
def test_parity_large_random_partial_credit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = [list(np.round(rng.random(int(rng.integers(1, 9))), 3)) for _ in range(2000)]
    assert_parity(matrix, 0.01)


def test_seed_example_shape() -> None:
    """The variance-plot method's FinQA example: 40 always correct, 45 always incorrect,
    15 mixed of 100."""
    matrix = [[1.0] * 3] * 40 + [[0.0] * 3] * 45 + [[1.0, 0.0, 0.0]] * 8 + [[1.0, 1.0, 0.0]] * 7
    assert_parity(matrix, 0.01)
    s = analyze(to_frame(matrix)).summary
    assert s.categories == {
        "always_correct": 40,
        "always_incorrect": 45,
        "high_variance": 15,
        "low_variance": 0,
    }
    assert s.high_variance_fraction == 0.15
    assert s.compute_multiplier.rule_of_thumb == {"low": 1, "high": 2}
