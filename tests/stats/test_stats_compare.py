"""curate.stats.compare: Fisher's exact test, Mann-Whitney U, transitions and sets, and
the per-sample test's false-positive rate and power in simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from curate.stats.compare import (
    SETS,
    TRANSITIONS,
    compare_samples,
    fisher_exact,
    fisher_p_values,
    mann_whitney_p_values,
    match_samples,
    set_counts,
    smallest_significant_rise,
    transition_counts,
)
from curate.stats.per_sample import sample_stats
from tests.conftest import long_frame


def _matrix_frame(scores: np.ndarray, prefix: str = "s") -> pl.DataFrame:
    """A samples x rollouts score matrix -> a long-format rollout frame."""
    samples, n = scores.shape
    return pl.DataFrame(
        {
            "sample_id": np.repeat([f"{prefix}{i}" for i in range(samples)], n),
            "rollout_idx": np.tile(np.arange(n), samples).astype(np.int32),
            "score": scores.ravel().astype(float),
            "error": pl.Series([None] * (samples * n), dtype=pl.String),
        }
    )


def _compare(a: pl.DataFrame, b: pl.DataFrame, **kw: object) -> pl.DataFrame:
    return compare_samples(match_samples(sample_stats(a), sample_stats(b)), **kw)  # type: ignore[arg-type]


# -- Fisher's exact test ----------------------------------------------------------------


def test_fisher_by_hand() -> None:
    # [[0, 8], [5, 3]]: margins 8, 8 and 5 passes of 16. P(x) = C(8,x) C(8,5-x) / C(16,5)
    # with C(16,5) = 4368: x = 0..5 give 56, 560, 1568, 1568, 560, 56 (/4368). The
    # observed x = 0 is as likely as x = 5 and less likely than the rest: p = 112/4368.
    assert fisher_exact(0, 8, 5, 3) == pytest.approx(112 / 4368, rel=1e-12)
    # 0/8 against 4/8: x = 0, 4 give 1*70 and 70*1 of C(16,4) = 1820; x = 1, 3 give
    # 8*56 = 448 each, x = 2 gives 28*28 = 784 -> p = 140/1820.
    assert fisher_exact(0, 8, 4, 4) == pytest.approx(140 / 1820, rel=1e-12)
    assert fisher_exact(3, 5, 3, 5) == pytest.approx(1.0)
    assert fisher_exact(0, 8, 0, 8) == 1.0  # no pass anywhere: nothing to test
    assert fisher_exact(8, 0, 8, 0) == 1.0


def test_fisher_symmetries() -> None:
    for a, b, c, d in [(1, 7, 6, 2), (0, 4, 3, 9), (2, 2, 9, 1)]:
        p = fisher_exact(a, b, c, d)
        assert fisher_exact(c, d, a, b) == pytest.approx(p)  # swap runs
        assert fisher_exact(b, a, d, c) == pytest.approx(p)  # swap pass/fail
        assert 0.0 < p <= 1.0


def test_fisher_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for a, b, c, d in itertools.product(range(0, 9, 2), range(0, 9, 3), range(0, 17, 3), range(5)):
        expected = stats.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue
        assert fisher_exact(a, b, c, d) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_fisher_p_values_per_row_follow_the_table() -> None:
    pairs = pl.DataFrame({"n_a": [8, 8, 4], "c_a": [0, 8, 1], "n_b": [8, 8, 12], "c_b": [5, 8, 9]})
    got = fisher_p_values(pairs).to_list()
    assert got == pytest.approx([fisher_exact(0, 8, 5, 3), 1.0, fisher_exact(1, 3, 9, 3)])


def test_smallest_significant_rise() -> None:
    # 0/8 -> 4/8 has p = 0.077, 0/8 -> 5/8 has p = 0.026.
    assert smallest_significant_rise(8, 8) == 5
    assert smallest_significant_rise(2, 2) is None  # 0/2 vs 2/2: p = 1/3
    assert smallest_significant_rise(32, 32) < 8


# -- Mann-Whitney U (partial credit) ----------------------------------------------------


def test_mann_whitney_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    a = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=(60, 8))
    b = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, 1.0], size=(60, 6))
    got = dict(mann_whitney_p_values(_matrix_frame(a).lazy(), _matrix_frame(b).lazy()).rows())
    for i in range(60):
        expected = stats.mannwhitneyu(a[i], b[i], method="asymptotic", use_continuity=True).pvalue
        assert got[f"s{i}"] == pytest.approx(expected, rel=1e-9)


def test_mann_whitney_all_tied_is_no_evidence() -> None:
    a = long_frame({"x": [0.5] * 4})
    b = long_frame({"x": [0.5] * 6})
    got = mann_whitney_p_values(a.lazy(), b.lazy())
    assert got.rows() == [("x", 1.0)]


# -- transitions and sets, by hand ------------------------------------------------------


def test_hand_built_transitions_and_sets() -> None:
    before = long_frame(
        {
            "wrong_to_mixed": [0] * 8,  # 0/8 -> 6/8: Fisher p = 0.007, learned
            "wrong_to_some": [0] * 8,  # 0/8 -> 2/8: p = 0.47, newly learnable only
            "wrong_stays": [0] * 8,  # still unreachable
            "mixed_to_right": [1, 0, 1, 0, 1, 0, 1, 0],  # 4/8 -> 8/8: p = 0.077, not learned
            "right_to_wrong": [1] * 8,  # 8/8 -> 0/8: p = 0.00016, forgotten
            "mixed_stays": [1, 1, 0, 0, 0, 0, 0, 0],  # 2/8 -> 3/8
            "only_before": [1, 0],  # not in the after run: not compared
        }
    )
    after = long_frame(
        {
            "wrong_to_mixed": [1, 1, 1, 1, 1, 1, 0, 0],
            "wrong_to_some": [1, 1, 0, 0, 0, 0, 0, 0],
            "wrong_stays": [0] * 8,
            "mixed_to_right": [1] * 8,
            "right_to_wrong": [0] * 8,
            "mixed_stays": [1, 1, 1, 0, 0, 0, 0, 0],
            "only_after": [1],
        }
    )
    compared = _compare(before, after)
    assert compared.height == 6
    counts = {(a, b): n for a, b, n in transition_counts(compared)}
    assert len(counts) == len(TRANSITIONS) == 9
    assert counts[("always_incorrect", "mixed")] == 2
    assert counts[("always_incorrect", "always_incorrect")] == 1
    assert counts[("mixed", "always_correct")] == 1
    assert counts[("always_correct", "always_incorrect")] == 1
    assert counts[("mixed", "mixed")] == 1
    assert sum(counts.values()) == 6
    assert set_counts(compared) == {
        "learned": 1,
        "forgotten": 1,
        "newly_learnable": 2,
        "still_unreachable": 1,
    }
    by_id = {row["sample_id"]: row for row in compared.iter_rows(named=True)}
    assert by_id["wrong_to_mixed"]["learned"] and by_id["wrong_to_mixed"]["newly_learnable"]
    assert by_id["wrong_to_mixed"]["p_value"] == pytest.approx(fisher_exact(0, 8, 6, 2))
    assert by_id["right_to_wrong"]["forgotten"]
    assert by_id["right_to_wrong"]["change"] == -1.0
    assert not by_id["mixed_to_right"]["significant"]  # p = 0.077: noise at N = 8
    assert by_id["mixed_to_right"]["p_value"] == pytest.approx(140 / 1820)
    assert by_id["wrong_to_some"]["newly_learnable"] and not by_id["wrong_to_some"]["learned"]
    # Each side carries the report's Wilson interval.
    assert by_id["mixed_stays"]["wilson_low_a"] < 0.25 < by_id["mixed_stays"]["wilson_high_a"]
    # A looser alpha calls the 4/8 -> 8/8 sample learned.
    loose = _compare(before, after, alpha=0.1)
    assert set_counts(loose)["learned"] == 2


def test_samples_without_a_score_are_not_compared() -> None:
    before = long_frame({"a": [None, None], "b": [1, 0]})
    after = long_frame({"a": [1, 1], "b": [1, 1]})
    assert _compare(before, after)["sample_id"].to_list() == ["b"]


def test_sets_partition_nothing_but_transitions_partition_everything() -> None:
    rng = np.random.default_rng(1)
    p = rng.beta(0.5, 0.5, 500)
    a = (rng.random((500, 8)) < p[:, None]).astype(float)
    b = (rng.random((500, 8)) < np.clip(p + 0.2, 0, 1)[:, None]).astype(float)
    compared = _compare(_matrix_frame(a), _matrix_frame(b))
    assert sum(n for *_, n in transition_counts(compared)) == 500
    sets = set_counts(compared)
    assert set(sets) == set(SETS)
    # newly learnable and still unreachable are rows of the transition table.
    counts = {(x, y): n for x, y, n in transition_counts(compared)}
    assert sets["newly_learnable"] == counts[("always_incorrect", "mixed")]
    assert sets["still_unreachable"] == counts[("always_incorrect", "always_incorrect")]


# -- simulation: false positives and power ----------------------------------------------


def test_equal_pass_rates_hold_the_false_positive_rate() -> None:
    """2,000 samples, N = 8 in each run, the same true pass rate in both (drawn from a
    uniform population): the share called significant stays at or under alpha."""
    rng = np.random.default_rng(2024)
    samples, n, alpha = 2000, 8, 0.05
    p = rng.uniform(0.0, 1.0, samples)
    a = (rng.random((samples, n)) < p[:, None]).astype(float)
    b = (rng.random((samples, n)) < p[:, None]).astype(float)
    compared = _compare(_matrix_frame(a), _matrix_frame(b), alpha=alpha)
    rate = compared["significant"].mean()
    se = math.sqrt(alpha * (1 - alpha) / samples)
    assert rate <= alpha + 2 * se, rate  # Fisher is conservative: ~1-2% here
    # No direction is favoured.
    sets = set_counts(compared)
    assert abs(sets["learned"] - sets["forgotten"]) <= 4 * math.sqrt(sets["learned"] + 1)


def test_a_real_change_is_detected_with_decent_power() -> None:
    """2,000 samples, N = 16, true pass rate 0.25 before and 0.75 after: Fisher's test
    calls ~74% of them learned (exactly 0.737 from the binomial sums), none forgotten."""
    rng = np.random.default_rng(7)
    samples, n = 2000, 16
    a = (rng.random((samples, n)) < 0.25).astype(float)
    b = (rng.random((samples, n)) < 0.75).astype(float)
    sets = set_counts(_compare(_matrix_frame(a), _matrix_frame(b)))
    assert sets["learned"] / samples >= 0.68
    assert sets["forgotten"] == 0


def test_partial_credit_false_positive_rate_and_power() -> None:
    rng = np.random.default_rng(11)
    samples, n, alpha = 2000, 8, 0.05
    mean = rng.uniform(0.1, 0.9, samples)

    def draw(shift: float) -> pl.DataFrame:
        scores = np.clip(rng.normal(mean[:, None] + shift, 0.2, (samples, n)), 0, 1).round(2)
        return _matrix_frame(scores)

    a, same, higher = draw(0.0), draw(0.0), draw(0.3)

    def compare(b: pl.DataFrame) -> pl.DataFrame:
        pvals = mann_whitney_p_values(a.lazy(), b.lazy())
        return _compare(a, b, alpha=alpha, p_values=pvals)

    rate = compare(same)["significant"].mean()
    assert rate <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / samples), rate
    assert set_counts(compare(higher))["learned"] / samples >= 0.6


def test_forecast_check_bins_and_correlations() -> None:
    import numpy as np

    from curate.stats.compare import forecast_check

    a = [0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 0.125]
    b = [0.0, 0.25, 0.5, 0.5, 1.0, 1.0, 0.75, 0.0]
    frame = pl.DataFrame({"pass_rate_a": a, "pass_rate_b": b})
    got = forecast_check(frame, binary=True)
    assert got["samples"] == 8
    assert got["pearson"] == pytest.approx(float(np.corrcoef(a, b)[0, 1]))
    assert got["mean_abs_error"] == pytest.approx(float(np.mean(np.abs(np.array(a) - b))))
    bins = {row["bin"]: row for row in got["bins"]}  # type: ignore[union-attr]
    assert bins["0"]["samples"] == 2 and bins["0"]["observed"] == pytest.approx(0.125)
    assert bins["(0, 0.25]"]["samples"] == 2 and bins["(0, 0.25]"]["predicted"] == pytest.approx(
        0.1875
    )
    assert bins["(0.75, 1)"]["samples"] == 0 and bins["1"]["observed"] == pytest.approx(0.875)
    assert sum(row["samples"] for row in got["bins"]) == 8  # type: ignore[union-attr]


def test_the_same_partial_credit_every_time_is_not_newly_learnable() -> None:
    """All 0 -> all 0.5: the outcome after is "mixed" (neither all full credit nor all 0),
    but every group's rewards are equal, so nothing became learnable; all 0 -> 0.5 and 1
    did."""
    before = long_frame({"same": [0.0] * 4, "differs": [0.0] * 4})
    after = long_frame({"same": [0.5] * 4, "differs": [0.5, 1.0, 0.5, 0.5]})
    by_id = {row["sample_id"]: row for row in _compare(before, after).iter_rows(named=True)}
    assert by_id["same"]["outcome_b"] == "mixed"
    assert not by_id["same"]["newly_learnable"]
    assert by_id["differs"]["newly_learnable"]
