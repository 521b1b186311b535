"""Per-sample statistics against hand-computed cases."""

from __future__ import annotations

import math

import polars as pl
import pytest

from curate.stats import CATEGORIES, aggregate_rollouts, analyze, pass_at_k_columns, sample_stats
from curate.stats.estimators import BetaPrior
from tests.stats.helpers import posterior_moment

E = None  # an error row


def row(frame: pl.DataFrame, sid: str) -> dict:
    return frame.filter(pl.col("sample_id") == sid).row(0, named=True)


def test_binary_sample_hand_computed(rollouts) -> None:
    # 2 passes in 5 scored rollouts, plus one failed rollout that must not count.
    stats = sample_stats(rollouts({"a": [1, 0, 0, E, 1, 0]}), prior=BetaPrior(1.0, 1.0))
    r = row(stats, "a")
    assert r["n_rollouts"] == 5
    assert r["n_errors"] == 1
    assert r["successes"] == 2
    assert r["mean_score"] == pytest.approx(0.4)
    assert r["variance"] == pytest.approx(0.24)  # population: 0.4 * 0.6
    assert r["variance_unbiased"] == pytest.approx(0.3)  # 0.24 * 5 / 4
    assert r["std_dev"] == pytest.approx(math.sqrt(0.24))
    assert r["best_score"] == 1.0
    assert r["worst_score"] == 0.0
    assert r["pass_rate"] == pytest.approx(0.4)
    assert r["smoothed_pass_rate"] == pytest.approx(3 / 7)  # (2 + 1) / (5 + 2)
    # n = 5 < G = 8: the posterior predictive on Beta(1 + 2, 1 + 3)
    all_pass = math.prod((3 + i) / (7 + i) for i in range(8))
    all_fail = math.prod((4 + i) / (7 + i) for i in range(8))
    assert r["gate_open_probability"] == pytest.approx(1 - all_pass - all_fail)
    assert r["category"] == "high_variance"


def test_wilson_columns(rollouts) -> None:
    stats = sample_stats(rollouts({"a": [1, 0, 0, 1, 0], "z": [0, 0, 0]}))
    a, z = row(stats, "a"), row(stats, "z")
    # Wilson 95% for 2/5: centre 0.4 pulled towards 0.5.
    assert a["wilson_low"] == pytest.approx(0.1176, abs=1e-4)
    assert a["wilson_high"] == pytest.approx(0.7693, abs=1e-4)
    assert z["wilson_low"] == 0.0
    assert z["wilson_high"] == pytest.approx(0.5615, abs=1e-4)


def test_pass_at_k_columns_for_every_k(rollouts) -> None:
    stats = sample_stats(rollouts({"a": [1, 0, 0, 1, 0], "b": [1, 0, 1]}))
    cols = pass_at_k_columns(stats, [1, 2, 3, 4, 5])
    a, b = row(cols, "a"), row(cols, "b")
    assert [a[f"pass@{k}"] for k in range(1, 6)] == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0])
    assert [b[f"pass@{k}"] for k in range(1, 4)] == pytest.approx([2 / 3, 1.0, 1.0])
    assert b["pass@4"] is None and b["pass@5"] is None  # k > n: undefined


def test_gate_column_uses_unbiased_estimator_when_n_reaches_g(rollouts) -> None:
    frame = rollouts({"a": [1] * 8 + [0] * 2, "b": [1] + [0] * 8, "c": [1] * 4 + [0] * 4})
    stats = sample_stats(frame, group_size=8)
    assert row(stats, "a")["gate_open_probability"] == pytest.approx(1 - 1 / 45)
    assert row(stats, "b")["gate_open_probability"] == pytest.approx(1 - 1 / 9)
    assert row(stats, "c")["gate_open_probability"] == pytest.approx(1.0)


def test_gate_column_is_the_posterior_predictive_when_n_below_g(rollouts) -> None:
    frame = rollouts({"a": [1, 1, 1], "b": [0, 1, 0, 0], "c": [0, 0, 0]})
    analysis = analyze(frame, group_size=8)
    prior = analysis.prior
    for sid, (c, n) in {"a": (3, 3), "b": (1, 4), "c": (0, 3)}.items():
        p = posterior_moment(prior, n, c, 1)
        r = row(analysis.per_sample, sid)
        assert r["smoothed_pass_rate"] == pytest.approx(p)
        want = 1 - posterior_moment(prior, n, c, 8) - posterior_moment(prior, n, c, 0, 8)
        assert r["gate_open_probability"] == pytest.approx(want)
        # Not the plug-in on the smoothed rate, which overstates (Jensen).
        assert r["gate_open_probability"] < 1 - (1 - p) ** 8 - p**8


def test_prior_is_fitted_on_the_whole_data_set(rollouts) -> None:
    frame = rollouts({f"s{i}": [1, 0, 1, 1] if i % 2 else [0, 0, 0, 1] for i in range(40)})
    analysis = analyze(frame)
    prior = analysis.prior
    assert analysis.summary.prior == prior.summary()
    assert analysis.summary.prior["kind"] == "npmle"
    # Pass rates are 0.75 and 0.25 in equal numbers: the prior mean is 0.5.
    assert prior.mean == pytest.approx(0.5, abs=1e-3)


def test_categories_follow_seed_004(rollouts) -> None:
    frame = rollouts(
        {
            "correct": [1, 1, 1],
            "wrong": [0, 0, 0],
            "mixed": [1, 0, 1],
            "partial_spread": [0.5, 0.5, 1.0],  # var 1/18 > 0.01, 0 < mean < 1
            "partial_flat": [0.5, 0.5, 0.5],  # var 0, best 0.5: low variance
            "partial_narrow": [0.2, 0.25],  # var 0.000625 <= 0.01: low variance
            "almost": [1.0, 1.0, 0.9],  # best 1 but not variance 0: low variance
            "errors_only": [E, E],
        }
    )
    stats = sample_stats(frame)
    cats = dict(stats.select("sample_id", "category").rows())
    assert cats == {
        "correct": "always_correct",
        "wrong": "always_incorrect",
        "mixed": "high_variance",
        "partial_spread": "high_variance",
        "partial_flat": "low_variance",
        "partial_narrow": "low_variance",
        "almost": "low_variance",
        "errors_only": None,
    }
    p = row(stats, "partial_spread")
    assert p["mean_score"] == pytest.approx(2 / 3)
    assert p["variance"] == pytest.approx(1 / 18)
    assert p["successes"] == 1  # only full credit counts as a pass
    assert p["pass_rate"] == pytest.approx(1 / 3)
    n = row(stats, "partial_narrow")
    assert n["variance"] == pytest.approx(0.000625)
    assert n["variance_unbiased"] == pytest.approx(0.00125)
    assert n["best_score"] == 0.25 and n["worst_score"] == 0.2


def test_threshold_moves_samples_between_high_and_low_variance(rollouts) -> None:
    frame = rollouts({"a": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]})  # var 0.09
    assert row(sample_stats(frame, threshold=0.01), "a")["category"] == "high_variance"
    assert row(sample_stats(frame, threshold=0.09), "a")["category"] == "low_variance"
    assert row(sample_stats(frame, threshold=0.089), "a")["category"] == "high_variance"


@pytest.mark.parametrize("scores", [[0.4, 0.6], [0.3, 0.5], [0.35, 0.55, 0.35, 0.55]])
def test_variance_equal_to_threshold_is_not_high_variance(rollouts, scores) -> None:
    # Each has variance exactly 0.01 in exact arithmetic: "variance > threshold" is false,
    # whichever way floating-point rounding lands.
    stats = sample_stats(rollouts({"a": scores}), threshold=0.01)
    assert row(stats, "a")["variance"] == pytest.approx(0.01)
    assert row(stats, "a")["category"] == "low_variance"


def test_variance_is_exactly_zero_for_constant_partial_scores(rollouts) -> None:
    stats = sample_stats(rollouts({"a": [0.1] * 7, "b": [0.7] * 3}), threshold=0.0)
    for sid in ("a", "b"):
        assert row(stats, sid)["variance"] == 0.0
        assert row(stats, sid)["std_dev"] == 0.0
        assert row(stats, sid)["category"] == "low_variance"


def test_errors_are_counted_and_never_scored(rollouts) -> None:
    frame = rollouts({"a": [E, 1, E, 1], "b": [E, E, E]})
    stats = sample_stats(frame)
    a, b = row(stats, "a"), row(stats, "b")
    assert (a["n_rollouts"], a["n_errors"], a["mean_score"]) == (2, 2, 1.0)
    assert a["category"] == "always_correct"
    assert (b["n_rollouts"], b["n_errors"]) == (0, 3)
    assert b["mean_score"] is None and b["variance"] is None and b["category"] is None
    assert b["gate_open_probability"] is None and b["smoothed_pass_rate"] is None


def test_single_rollout_has_no_unbiased_variance(rollouts) -> None:
    stats = sample_stats(rollouts({"a": [1]}))
    r = row(stats, "a")
    assert r["variance"] == 0.0
    assert r["variance_unbiased"] is None


def test_aggregate_rollouts_accepts_lazy_frames(rollouts) -> None:
    frame = rollouts({"a": [1, 0, 0.5], "b": [E, 1]})
    eager = aggregate_rollouts(frame).sort("sample_id")
    lazy = aggregate_rollouts(frame.lazy()).sort("sample_id")
    assert eager.equals(lazy)
    assert dict(eager.select("sample_id", "partial").rows()) == {"a": 1, "b": 0}


def test_partial_credit_gate_counts_distinct_values(rollouts) -> None:
    # With partial credit a group is "mixed" when its scores are not all equal.
    frame = rollouts({"a": [0.5] * 6 + [1.0] * 2, "b": [0.5, 0.5, 0.5]})
    stats = sample_stats(frame, group_size=4)
    # a: n = 8 >= 4: 1 - C(6,4)/C(8,4) - C(2,4)/C(8,4) = 1 - 15/70
    assert row(stats, "a")["gate_open_probability"] == pytest.approx(1 - 15 / 70)
    # b: n = 3 < 4: the posterior predictive, over the values 0.5 and 1.0 of the data set
    # with a prior fitted per value: between 0 and 1 (b may yet score 1.0)
    model = analyze(frame, group_size=4).model
    assert model.values == (0.5, 1.0)
    half, one = model.priors
    same = posterior_moment(half, 3, 3, 4) + posterior_moment(one, 3, 0, 4)
    b = row(stats, "b")["gate_open_probability"]
    assert b == pytest.approx(1 - same)
    assert 0.0 < b < 1.0


def test_category_counts_add_up_on_a_mixed_population(rollouts) -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    samples = {}
    for i in range(300):
        kind = i % 3
        n = int(rng.integers(1, 9))
        if kind == 0:
            scores = rng.integers(0, 2, n).astype(float)
        elif kind == 1:
            scores = np.round(rng.random(n), 2)
        else:
            scores = np.full(n, rng.choice([0.0, 0.3, 1.0]))
        samples[f"s{i}"] = list(scores)
    frame = rollouts(samples)
    summary = analyze(frame).summary
    assert set(summary.categories) == set(CATEGORIES)
    assert sum(summary.categories.values()) == summary.samples == 300
    assert summary.categories["low_variance"] > 0
