"""Scalar estimators against hand-computed values and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from curate.stats.estimators import (
    BetaPrior,
    choose_ratio,
    fit_beta_prior,
    gate_open_bernoulli,
    gate_open_posterior,
    gate_open_unbiased,
    pass_at_k,
    wilson_interval,
)
from curate.stats.per_sample import gate_forecast


def comb_pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s definition with exact integers: 1 - C(n-c, k) / C(n, k)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


# ---------------------------------------------------------------- pass@k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 is the pass rate
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # fewer than k failures: every draw of 4 holds a pass
        (5, 2, 5, 1.0),
        (4, 0, 1, 0.0),
        (4, 0, 4, 0.0),
        (4, 4, 1, 1.0),
        (8, 1, 4, 0.5),  # 1 - C(7,4)/C(8,4) = 1 - 35/70
        (10, 3, 2, 1 - 21 / 45),
    ],
)
def test_pass_at_k_hand_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 40])
def test_pass_at_k_matches_binomial_definition_for_every_k(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(comb_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_is_monotone_in_k_and_c() -> None:
    n = 12
    for c in range(n + 1):
        values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
        assert values == sorted(values)
    for k in range(1, n + 1):
        values = [pass_at_k(n, c, k) for c in range(n + 1)]
        assert values == sorted(values)


@pytest.mark.parametrize(("n", "k"), [(4, 5), (4, 0), (0, 1)])
def test_pass_at_k_rejects_k_outside_1_to_n(n: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, 0, k)


@pytest.mark.parametrize("n", [4, 8, 16])
@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9])
def test_pass_at_k_is_exactly_unbiased_under_the_binomial(n: int, p: float) -> None:
    """E[pass@k estimate] over c ~ Binomial(n, p) is 1 - (1 - p)^k, exactly."""
    pmf = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    for k in range(1, n + 1):
        expected = sum(w * pass_at_k(n, c, k) for c, w in enumerate(pmf))
        assert expected == pytest.approx(1 - (1 - p) ** k, abs=1e-12)


# ---------------------------------------------------------------- gate


def test_choose_ratio() -> None:
    assert choose_ratio(8, 10, 8) == pytest.approx(math.comb(8, 8) / math.comb(10, 8))
    assert choose_ratio(6, 10, 3) == pytest.approx(math.comb(6, 3) / math.comb(10, 3))
    assert choose_ratio(2, 10, 3) == 0.0
    assert choose_ratio(10, 10, 10) == 1.0


@pytest.mark.parametrize(
    ("n", "c", "g", "expected"),
    [
        (10, 8, 8, 1 - 1 / 45),  # C(8,8)/C(10,8) = 1/45; C(2,8) = 0
        (9, 1, 8, 1 - 1 / 9),  # C(8,8)/C(9,8) = 1/9
        (10, 4, 8, 1.0),  # neither 4 passes nor 6 failures can fill a group of 8
        (8, 8, 8, 0.0),
        (8, 0, 8, 0.0),
        (8, 4, 8, 1.0),
        (6, 3, 2, 1 - 3 / 15 - 3 / 15),
        (12, 5, 4, 1 - (5 + 35) / 495),
    ],
)
def test_gate_unbiased_hand_values(n: int, c: int, g: int, expected: float) -> None:
    formula = 1 - math.comb(c, g) / math.comb(n, g) - math.comb(n - c, g) / math.comb(n, g)
    assert formula == pytest.approx(expected, abs=1e-12)
    assert gate_open_unbiased(n, c, g) == pytest.approx(expected, abs=1e-12)


def test_gate_unbiased_needs_n_at_least_g() -> None:
    with pytest.raises(ValueError):
        gate_open_unbiased(4, 2, 8)


def test_gate_bernoulli_closed_form() -> None:
    assert gate_open_bernoulli(0.5, 8) == pytest.approx(1 - 2 * 0.5**8)
    assert gate_open_bernoulli(0.2, 4) == pytest.approx(1 - 0.8**4 - 0.2**4)
    assert gate_open_bernoulli(0.0, 8) == 0.0
    assert gate_open_bernoulli(1.0, 8) == 0.0
    assert gate_open_bernoulli(0.5, 1) == 0.0  # a group of one is never mixed


def test_gate_forecast_switches_on_n_versus_g() -> None:
    prior = BetaPrior(2.0, 3.0)
    # n >= G: the unbiased estimator on the observed counts, prior ignored
    assert gate_forecast(10, 8, prior, 8) == pytest.approx(1 - 1 / 45)
    assert gate_forecast(8, 8, prior, 8) == 0.0
    # n < G: the Beta-binomial posterior predictive on Beta(a + c, b + n - c)
    a, b = 2.0 + 2, 3.0 + 2
    all_pass = math.prod((a + i) / (a + b + i) for i in range(8))
    all_fail = math.prod((b + i) / (a + b + i) for i in range(8))
    assert gate_forecast(4, 2, prior, 8) == pytest.approx(1 - all_pass - all_fail)
    assert gate_forecast(4, 2, prior, 8) == pytest.approx(gate_open_posterior(4, 2, 2.0, 3.0, 8))
    # ... which is not zero even when every observed rollout passed, and below the plug-in
    p = (3 + 2.0) / (3 + 5.0)
    assert 0 < gate_forecast(3, 3, prior, 8) < 1 - (1 - p) ** 8 - p**8


@pytest.mark.parametrize("g", [2, 4, 8])
@pytest.mark.parametrize("n", [8, 12, 16])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.77])
def test_gate_unbiased_is_exactly_unbiased_under_the_binomial(n: int, g: int, p: float) -> None:
    pmf = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
    expected = sum(w * gate_open_unbiased(n, c, g) for c, w in enumerate(pmf))
    assert expected == pytest.approx(1 - (1 - p) ** g - p**g, abs=1e-12)


# ---------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("x", "n", "low", "high"),
    [
        # Newcombe (1998), Statistics in Medicine 17:857, table I, method 3 (Wilson score).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_textbook_values(x: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(x, n)
    assert lo == pytest.approx(low, abs=5e-5)
    assert hi == pytest.approx(high, abs=5e-5)


def test_wilson_closed_form_and_bounds() -> None:
    z = 1.959963984540054
    n, x = 8, 3
    p = x / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    assert wilson_interval(x, n) == pytest.approx((centre - half, centre + half))
    for n in (1, 3, 8):
        for x in range(n + 1):
            lo, hi = wilson_interval(x, n)
            assert 0.0 <= lo <= x / n <= hi <= 1.0
    assert wilson_interval(4, 4)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


# ---------------------------------------------------------------- Beta prior


def test_beta_prior_smoothing() -> None:
    prior = BetaPrior(2.0, 6.0)
    assert prior.mean == 0.25
    assert prior.smooth(3, 4) == pytest.approx(5 / 12)
    assert prior.smooth(0, 0) == prior.mean
    # Shrinkage: a smoothed rate lies between the raw rate and the prior mean.
    for c in range(9):
        s = prior.smooth(c, 8)
        assert min(c / 8, 0.25) <= s <= max(c / 8, 0.25)


@pytest.mark.parametrize(
    ("alpha", "beta", "n", "seed"),
    [(2.0, 5.0, 8, 1), (0.5, 0.5, 8, 2), (1.5, 1.5, 16, 3), (4.0, 1.0, 12, 4)],
)
def test_prior_fit_recovers_known_beta_binomial(
    alpha: float, beta: float, n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    p = rng.beta(alpha, beta, size=60_000)
    c = rng.binomial(n, p)
    values, counts = np.unique(c, return_counts=True)
    prior = fit_beta_prior((n, float(v), int(w)) for v, w in zip(values, counts, strict=True))
    assert prior.alpha == pytest.approx(alpha, rel=0.08)
    assert prior.beta == pytest.approx(beta, rel=0.08)
    assert prior.mean == pytest.approx(alpha / (alpha + beta), abs=0.01)


def test_prior_fit_degenerate_inputs_still_give_a_proper_prior() -> None:
    assert fit_beta_prior([]) == BetaPrior(1.0, 1.0)
    for counts in ([(8, 8.0, 100)], [(8, 0.0, 100)], [(4, 2.0, 50)]):
        prior = fit_beta_prior(counts)
        assert prior.alpha > 0 and prior.beta > 0
        assert math.isfinite(prior.alpha) and math.isfinite(prior.beta)


def test_prior_fit_does_not_depend_on_input_order() -> None:
    """The (n, c) histogram comes from a group_by whose order changes from process to
    process; the fit (and so the report's JSON) must not change with it. Before the fix
    the fitted prior moved by ~1e-8 between orders."""
    import random

    counts = [(4, 4.0, 2), (4, 0.0, 3), (4, 3.0, 1), (4, 1.0, 1), (3, 2.0, 1)]
    reference = fit_beta_prior(counts)
    rng = random.Random(0)
    for _ in range(20):
        shuffled = counts[:]
        rng.shuffle(shuffled)
        assert fit_beta_prior(shuffled) == reference


def test_gate_posterior_hand_values() -> None:
    # Uniform prior, nothing observed: P(a pair is mixed) = 2 E[p(1-p)] = 1/3.
    assert gate_open_posterior(0, 0, 1.0, 1.0, 2) == pytest.approx(1 / 3)
    # Beta(1, 1) after 1 pass in 1: posterior Beta(2, 1); E[p^2] = 1/2, E[(1-p)^2] = 1/6.
    assert gate_open_posterior(1, 1, 1.0, 1.0, 2) == pytest.approx(1 - 1 / 2 - 1 / 6)
    assert gate_open_posterior(5, 2, 0.5, 0.5, 1) == 0.0


def test_gate_posterior_is_the_posterior_mean_of_u() -> None:
    """E[u(p)] over p ~ Beta(a + c, b + n - c), by Monte Carlo (SE < 5e-4); and below
    the plug-in u on the posterior mean when that is near 0 (Jensen)."""
    import numpy as np

    rng = np.random.default_rng(5)
    for n, c, a, b, g in [(8, 0, 0.4, 0.6, 16), (8, 3, 2.0, 5.0, 32), (3, 3, 0.3, 0.3, 64)]:
        p = rng.beta(a + c, b + n - c, 1_000_000)
        want = float(np.mean(1 - (1 - p) ** g - p**g))
        assert gate_open_posterior(n, c, a, b, g) == pytest.approx(want, abs=3e-3)
    mean = 0.4 / (0.4 + 0.6 + 8)
    assert gate_open_posterior(8, 0, 0.4, 0.6, 16) < gate_open_bernoulli(mean, 16)
