"""Data-set summary: the variance-plot method's numbers, pass@k table, gate, multiplier,
warnings."""

from __future__ import annotations

import math

import pytest

from curate.stats import analyze, pass_at_k_table
from curate.stats.dataset import (
    MAX_MULTIPLIER,
    compute_multiplier,
    gate_curve,
    rule_of_thumb,
    rule_of_thumb_text,
)
from tests.conftest import JSON_CONTRACT_KEYS
from tests.stats.helpers import posterior_moment

E = None

SUMMARY_KEYS = JSON_CONTRACT_KEYS


def population(hv: int, total: int, n: int = 4) -> dict[str, list[float]]:
    """`hv` high-variance samples ([1, 0, ...]) among `total`; the rest always wrong."""
    out = {}
    for i in range(total):
        out[f"s{i:03d}"] = [1.0] + [0.0] * (n - 1) if i < hv else [0.0] * n
    return out


def test_summary_hand_computed(rollouts) -> None:
    frame = rollouts(
        {
            "a": [1, 1, 1, 1],  # always correct: mean 1, best 1
            "b": [0, 0, 0, 0],  # always incorrect: mean 0, best 0
            "c": [1, 0, 0, 0],  # high variance: mean .25, best 1, var .1875
            "d": [1, 1, 0, E],  # high variance: mean 2/3, best 1, one error
        }
    )
    s = analyze(frame, group_size=2).summary
    assert set(s.to_dict()) >= SUMMARY_KEYS
    assert s.samples == 4
    assert s.rollouts == 16  # scored + failed
    assert s.errors == 1
    assert s.error_rate == pytest.approx(1 / 16)
    mean = (1 + 0 + 0.25 + 2 / 3) / 4
    best = (1 + 0 + 1 + 1) / 4
    assert s.mean_score == pytest.approx(mean)
    assert s.best_of_n == pytest.approx(best)
    assert s.potential_gain == pytest.approx(best - mean)
    assert s.relative_gain == pytest.approx((best - mean) / mean)
    assert s.categories == {
        "always_correct": 1,
        "always_incorrect": 1,
        "high_variance": 2,
        "low_variance": 0,
    }
    assert s.high_variance_fraction == 0.5
    assert s.threshold == 0.01
    # pass@k averaged over samples with at least k scored rollouts:
    # a: 1,1,1,(1)  b: 0,0,0,(0)  c: 1/4, 1/2, 3/4, 1  d (n=3, c=2): 2/3, 1, 1
    assert s.pass_at_k["1"] == pytest.approx((1 + 0 + 0.25 + 2 / 3) / 4)
    assert s.pass_at_k["2"] == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert s.pass_at_k["3"] == pytest.approx((1 + 0 + 0.75 + 1) / 4)
    assert s.pass_at_k["4"] == pytest.approx((1 + 0 + 1) / 3)  # d has only 3
    assert list(s.pass_at_k) == ["1", "2", "3", "4"]
    # Gate at G = 2 (n >= G everywhere): 1 - C(c,2)/C(n,2) - C(n-c,2)/C(n,2)
    gate_c = 1 - 0 / 6 - 3 / 6
    gate_d = 1 - 1 / 3 - 0
    assert s.gate == {
        "group_size": 2,
        "expected_open_fraction": pytest.approx((gate_c + gate_d) / 4),
        "interval": None,  # every sample has n >= G: no model, no interval
    }
    assert s.rollouts_per_sample == {"min": 3, "max": 4, "median": 4.0}
    assert s.binary_scores is True


def test_summary_with_partial_credit(rollouts) -> None:
    s = analyze(rollouts({"a": [0.5, 1.0], "b": [0.2, 0.2, 0.2]})).summary
    assert s.binary_scores is False
    assert s.mean_score == pytest.approx((0.75 + 0.2) / 2)
    assert s.best_of_n == pytest.approx((1.0 + 0.2) / 2)
    assert s.categories["low_variance"] == 1 and s.categories["high_variance"] == 1


def test_pass_at_k_table_weights_by_samples_with_enough_rollouts(rollouts) -> None:
    per_sample = analyze(rollouts({"a": [1, 0], "b": [0, 0, 0, 1], "c": [1]})).per_sample
    table = pass_at_k_table(per_sample)
    assert table["k"].to_list() == [1, 2, 3, 4]
    assert table["samples"].to_list() == [3, 2, 1, 1]
    assert table["pass_at_k"].to_list() == pytest.approx(
        [(0.5 + 0.25 + 1) / 3, (1 + 0.5) / 2, 0.75, 1.0]
    )


@pytest.mark.parametrize(
    ("share", "band"),
    [
        (0.0, "warning"),
        (0.0999, "warning"),
        (0.10, "2-4"),
        (0.1499, "2-4"),
        (0.15, "1-2"),
        (0.2, "1-2"),
        (0.30, "1-2"),
        (0.3001, "1"),
        (1.0, "1"),
    ],
)
def test_rule_of_thumb_bands(share: float, band: str) -> None:
    rule = rule_of_thumb(share)
    text = rule_of_thumb_text(rule)
    if band == "warning":
        assert rule == {"low": None, "high": None} and text == "none (under 10%)"
    else:
        low, _, high = band.partition("-")
        assert rule == {"low": int(low), "high": int(high or low)}
        assert text == f"{band}x"


@pytest.mark.parametrize(
    ("hv", "total", "band"),
    [(1, 20, "warning"), (2, 20, "2-4"), (3, 20, "1-2"), (6, 20, "1-2"), (7, 20, "1")],
)
def test_rule_of_thumb_through_the_summary(rollouts, hv: int, total: int, band: str) -> None:
    s = analyze(rollouts(population(hv, total))).summary
    assert s.high_variance_fraction == pytest.approx(hv / total)
    text = "none (under 10%)" if band == "warning" else f"{band}x"
    assert s.compute_multiplier.rule_of_thumb_text == text
    assert (s.compute_multiplier.rule_of_thumb["low"] is None) == (band == "warning")
    low_signal = any("under 10%" in w for w in s.warnings)
    assert low_signal == (band == "warning")


def test_model_based_multiplier_rule(rollouts) -> None:
    analysis = analyze(rollouts(population(10, 40, n=8)))
    per_sample, prior = analysis.per_sample, analysis.prior
    m = compute_multiplier(per_sample, 8, 0.25, prior=prior, binary=True)
    assert 1 <= m.recommended <= MAX_MULTIPLIER
    sizes = [8 * k for k in range(1, MAX_MULTIPLIER + 2)]
    fractions = gate_curve(per_sample, prior, sizes)["expected_open_fraction"].to_list()
    curve = dict(zip(range(1, MAX_MULTIPLIER + 2), fractions, strict=True))
    # The rule: the smallest m whose next step adds less than 2 points of mixed groups.
    for k in range(1, m.recommended):
        assert curve[k + 1] - curve[k] >= 0.02
    if m.recommended < MAX_MULTIPLIER:
        assert curve[m.recommended + 1] - curve[m.recommended] < 0.02
        assert f"group size {8 * m.recommended}" in m.reason
    assert "\n" not in m.reason and m.reason
    assert m.rule


def test_multiplier_one_when_larger_groups_do_not_help(rollouts) -> None:
    # Pass rates near 1/2 are mixed at G = 8 already; bigger groups add almost nothing.
    frame = rollouts({f"s{i}": [1, 0] * 4 for i in range(30)})
    assert analyze(frame).summary.compute_multiplier.recommended == 1


def test_gate_curve_binary_matches_per_sample_gate(rollouts) -> None:
    analysis = analyze(rollouts({"a": [1, 0, 0, 0, 1, 1, 1, 1], "b": [0] * 8, "c": [1, 0, 0]}))
    curve = gate_curve(analysis.per_sample, analysis.prior, [1, 2, 8], binary=True)
    values = dict(curve.rows())
    assert values[1] == 0.0
    # G = 8: unbiased for a and b (n = 8); c has 3 rollouts, so the posterior predictive.
    a8 = 1 - math.comb(5, 8) - math.comb(3, 8)  # 5 passes, 3 failures: any 8 are mixed
    prior = analysis.prior
    c8 = 1 - posterior_moment(prior, 3, 1, 8) - posterior_moment(prior, 3, 1, 0, 8)
    assert values[8] == pytest.approx((a8 + 0 + c8) / 3)
    a2 = 1 - math.comb(5, 2) / math.comb(8, 2) - math.comb(3, 2) / math.comb(8, 2)
    c2 = 1 - 0 - 1 / 3
    assert values[2] == pytest.approx((a2 + 0 + c2) / 3)


# ---------------------------------------------------------------- warnings


def warnings_for(rollouts, samples: dict) -> list[str]:
    return analyze(rollouts(samples)).summary.warnings


def test_warning_fewer_than_three_rollouts(rollouts) -> None:
    w = warnings_for(rollouts, {f"s{i}": [1, 0] for i in range(60)})
    assert any("60 sample(s) have fewer than 3 scored rollouts" in x for x in w)


def test_warning_ragged_counts(rollouts) -> None:
    samples = {f"s{i}": [1, 0, 1, 0] for i in range(60)}
    samples["s0"] = [1, 0, 1]
    w = warnings_for(rollouts, samples)
    assert any("ragged rollout counts: 3 to 4" in x for x in w)


def test_warning_errors(rollouts) -> None:
    samples = {f"s{i}": [1, 0, 1, 0] for i in range(60)}
    samples["s0"] = [1, 0, E, 0, 1]
    samples["s1"] = [E, E, E]
    w = warnings_for(rollouts, samples)
    assert any("4 rollout(s) failed" in x for x in w)
    assert any("1 sample(s) have no scored rollout" in x for x in w)


def test_warning_small_data_set(rollouts) -> None:
    assert any("only 49 samples" in x for x in warnings_for(rollouts, population(20, 49)))
    assert not any("samples: estimates" in x for x in warnings_for(rollouts, population(20, 50)))


def test_warning_best_of_n_close_to_mean(rollouts) -> None:
    # Almost every sample is consistent: best-of-N barely beats the mean.
    samples = {f"s{i}": [1, 1, 1, 1] for i in range(99)}
    samples["x"] = [1, 0, 1, 1]
    w = warnings_for(rollouts, samples)
    assert any("best-of-N" in x and "close to the mean" in x for x in w)


def test_clean_data_set_has_no_warnings(rollouts) -> None:
    samples = {}
    for i in range(100):
        samples[f"s{i}"] = [[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0], [0, 1, 1, 1]][i % 4]
    assert warnings_for(rollouts, samples) == []


def test_no_scored_sample(rollouts) -> None:
    s = analyze(rollouts({"a": [E, E], "b": [E]})).summary
    assert s.samples == 0
    assert s.unscored_samples == 2
    assert s.errors == 3 and s.rollouts == 3
    assert s.mean_score is None and s.best_of_n is None and s.relative_gain is None
    assert s.warnings == ["no sample has a scored rollout"]


def test_relative_gain_undefined_when_mean_is_zero(rollouts) -> None:
    s = analyze(rollouts({"a": [0, 0], "b": [0, 0, 0]})).summary
    assert s.mean_score == 0.0 and s.potential_gain == 0.0
    assert s.relative_gain is None


@pytest.mark.parametrize("size", [8, 500])
def test_summary_is_reproducible_whatever_the_row_order(rollouts, size: int) -> None:
    """Same rollouts, any order: the same summary, up to float summation order.

    (See also test_prior_fit_does_not_depend_on_input_order in test_stats_estimators.py.)
    """
    import numpy as np

    from tests.report.goldens import assert_json_close

    rng = np.random.default_rng(5)
    samples = {
        f"s{i:04d}": list((rng.random(int(rng.integers(2, 9))) < rng.beta(0.5, 0.5)).astype(float))
        for i in range(size)
    }
    frame = rollouts(samples)
    first = analyze(frame).summary.to_dict()
    for seed in range(8):
        shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
        assert_json_close(analyze(shuffled).summary.to_dict(), first)
