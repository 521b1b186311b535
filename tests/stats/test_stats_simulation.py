"""The pass@k and gate estimators are unbiased: simulate samples with known pass rates.

Every sample in a population shares one true pass rate p, so the mean of the per-sample
estimates must match the closed form within sampling error (a few standard errors).
Fixed seeds keep the tests deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

from curate.stats import analyze, gate_curve, pass_at_k_columns
from curate.stats.estimators import gate_open_bernoulli

SAMPLES = 3000
Z = 4.0  # standard errors of tolerance


def simulate(p: float, n_lo: int, n_hi: int, seed: int) -> pl.DataFrame:
    """SAMPLES samples, each with n ~ U{n_lo..n_hi} Bernoulli(p) rollouts, long format."""
    rng = np.random.default_rng(seed)
    n = rng.integers(n_lo, n_hi + 1, size=SAMPLES)
    sample_idx = np.repeat(np.arange(SAMPLES), n)
    run_idx = np.concatenate([np.arange(k) for k in n])
    score = (rng.random(sample_idx.size) < p).astype(np.float64)
    return pl.DataFrame(
        {
            "sample_id": [f"s{i:05d}" for i in sample_idx],
            "run_idx": run_idx.astype(np.int32),
            "score": score,
            "error": pl.Series([None] * sample_idx.size, dtype=pl.String),
        }
    )


def comb_pass_at_k(n: int, c: int, k: int) -> float:
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def comb_gate(n: int, c: int, g: int) -> float:
    return 1 - (math.comb(c, g) + math.comb(n - c, g)) / math.comb(n, g)


def exact_se(ns: list[int], p: float, estimator: Callable[[int, int], float]) -> float:
    """Standard error of the mean estimate over samples with these rollout counts.

    The estimator's variance at each n is exact under c ~ Binomial(n, p) (written with
    integer binomials, independent of curate); near p = 0 or 1 a finite simulation may
    show no spread at all, so the empirical standard deviation would be useless there.
    """
    var_at: dict[int, float] = {}
    for n in set(ns):
        pmf = [math.comb(n, c) * p**c * (1 - p) ** (n - c) for c in range(n + 1)]
        mean = sum(w * estimator(n, c) for c, w in enumerate(pmf))
        var_at[n] = sum(w * (estimator(n, c) - mean) ** 2 for c, w in enumerate(pmf))
    return math.sqrt(sum(var_at[n] for n in ns)) / len(ns)


def assert_unbiased(estimates: np.ndarray, truth: float, se: float, what: str) -> None:
    mean = float(np.mean(estimates))
    tol = Z * se + 1e-12
    assert abs(mean - truth) <= tol, f"{what}: mean {mean:.6f} vs truth {truth:.6f} (se {se:.6f})"


CASES = [(0.05, 1), (0.2, 2), (0.5, 3), (0.73, 4), (0.95, 5)]


@pytest.mark.parametrize(("p", "seed"), CASES)
def test_pass_at_k_unbiased_for_every_k(p: float, seed: int) -> None:
    frame = simulate(p, 8, 16, seed)
    per_sample = analyze(frame).per_sample
    ks = list(range(1, 17))
    cols = pass_at_k_columns(per_sample, ks)
    for k in ks:
        usable = cols.filter(pl.col("n_rollouts") >= k)
        values = usable[f"pass@{k}"].to_numpy()
        assert values.size > 0 and not np.isnan(values).any()
        se = exact_se(usable["n_rollouts"].to_list(), p, lambda n, c, k=k: comb_pass_at_k(n, c, k))
        assert_unbiased(values, 1 - (1 - p) ** k, se, f"pass@{k} at p={p}")


@pytest.mark.parametrize(("p", "seed"), CASES)
def test_pass_at_k_table_unbiased(p: float, seed: int) -> None:
    frame = simulate(p, 8, 16, seed + 100)
    analysis = analyze(frame)
    ns = analysis.per_sample["n_rollouts"].to_list()
    for k in range(1, 17):
        usable = [n for n in ns if n >= k]
        se = exact_se(usable, p, lambda n, c, k=k: comb_pass_at_k(n, c, k))
        value = analysis.summary.pass_at_k[str(k)]
        assert_unbiased(np.array([value]), 1 - (1 - p) ** k, se, f"table pass@{k} at p={p}")


@pytest.mark.parametrize("group_size", [2, 4, 8])
@pytest.mark.parametrize(("p", "seed"), CASES)
def test_gate_unbiased_when_n_reaches_g(p: float, seed: int, group_size: int) -> None:
    frame = simulate(p, 8, 16, seed + 10 * group_size)
    analysis = analyze(frame, group_size=group_size)
    per_sample = analysis.per_sample
    gates = per_sample["gate_open_probability"].to_numpy()
    truth = 1 - (1 - p) ** group_size - p**group_size
    se = exact_se(per_sample["n_rollouts"].to_list(), p, lambda n, c: comb_gate(n, c, group_size))
    assert_unbiased(gates, truth, se, f"gate G={group_size} at p={p}")
    assert analysis.summary.gate["expected_open_fraction"] == pytest.approx(float(np.mean(gates)))


def test_plug_in_gate_would_be_biased() -> None:
    """Power check: u(c/n) in place of the unbiased estimator fails the same test."""
    p, g = 0.5, 8
    frame = simulate(p, 8, 8, seed=9)
    per_sample = analyze(frame, group_size=g).per_sample
    truth = 1 - (1 - p) ** g - p**g
    se = exact_se([8] * per_sample.height, p, lambda n, c: comb_gate(n, c, g))
    plug_in = np.array([gate_open_bernoulli(r, g) for r in per_sample["pass_rate"].to_list()])
    with pytest.raises(AssertionError):
        assert_unbiased(plug_in, truth, se, "plug-in")
    assert_unbiased(per_sample["gate_open_probability"].to_numpy(), truth, se, "unbiased")


def test_smoothed_gate_below_g_is_close_for_a_homogeneous_population() -> None:
    """n < G falls back to u(p~): not unbiased, but close when the prior is tight."""
    p, g = 0.3, 16
    frame = simulate(p, 8, 8, seed=11)
    gates = analyze(frame, group_size=g).per_sample["gate_open_probability"].to_numpy()
    truth = 1 - (1 - p) ** g - p**g
    assert abs(float(np.mean(gates)) - truth) < 0.05


@pytest.mark.parametrize(("alpha", "beta"), [(0.4, 0.6), (2.0, 14.0), (0.3, 0.3)])
def test_gate_curve_beyond_n_is_calibrated(alpha: float, beta: float) -> None:
    """Past the rollouts observed (G > n), the data-set curve forecasts how many samples
    a bigger group would open: it must match the truth on the samples' real pass rates.
    u(p~) on the smoothed rate, the plug-in, overshoots and fails the same check."""
    rng = np.random.default_rng(21)
    samples, n = 20_000, 8
    p = rng.beta(alpha, beta, samples)
    passes = rng.binomial(n, p)
    score = (np.arange(n)[None, :] < passes[:, None]).astype(np.float64).ravel()
    frame = pl.DataFrame(
        {
            "sample_id": np.repeat([f"s{i:05d}" for i in range(samples)], n),
            "run_idx": np.tile(np.arange(n, dtype=np.int32), samples),
            "score": score,
            "error": pl.Series([None] * score.size, dtype=pl.String),
        }
    )
    analysis = analyze(frame)
    sizes = [16, 32, 64]
    curve = dict(gate_curve(analysis.per_sample, analysis.prior, sizes).rows())
    smoothed = analysis.per_sample["smoothed_pass_rate"].to_numpy()
    for g in sizes:
        truth = float(np.mean(1 - (1 - p) ** g - p**g))
        assert curve[g] == pytest.approx(truth, abs=0.01), f"G={g}"
        plug_in = float(np.mean([gate_open_bernoulli(x, g) for x in smoothed]))
        assert abs(plug_in - truth) > 0.03, f"plug-in at G={g} was not biased"
