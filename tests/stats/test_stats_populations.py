"""Every printed figure on the populations real data sets have, through the real fixed
and adaptive paths.

The class under test: populations of true pass rates that are not one Beta (point
masses at exactly 0 and 1 beside a continuous part, well separated modes, a single
point mass in the middle) and Beta shapes; fixed N below and above G, ragged n, an
adaptive cap; 0/1 and partial-credit scores. The truths are the population's own
(computed from the simulated pass rates, independently of curate).

What must hold:
- a figure the rollouts observe (G <= every sample's n) is within 3 standard errors of
  the truth (or 0.01 where the standard error is tiny);
- a figure past the rollouts taken carries a 95% interval that holds the truth;
- when the multiplier's interval holds one value, it is the one the true curve gives;
- an adaptive run's model-based figures are within 3 standard errors (or 0.01).

`test_the_beta_prior_fails_the_same_checks` runs the same check with the Beta prior
curate used before: it must fail (so this file can fail).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

import curate.stats.analysis as analysis_module
from curate.evaluation.adaptive import AdaptivePolicy, replay
from curate.stats import analyze
from curate.stats.dataset import MAX_MULTIPLIER, MULTIPLIER_MIN_GAIN, gate_curve
from curate.stats.estimators import fit_beta_prior
from curate.stats.multiplicity import pair_histogram
from tests.stats.test_stats_simulation import long_format

SAMPLES = 4000
Z = 3.0
FLOOR = 0.01  # "within 0.01 where the standard error is tiny"

Population = Callable[[np.random.Generator, int], np.ndarray]


def mixture(*parts: tuple[float, Callable[[np.random.Generator, int], np.ndarray]]) -> Population:
    """Pass rates drawn from the parts in the given proportions."""

    def draw(rng: np.random.Generator, size: int) -> np.ndarray:
        which = rng.choice(len(parts), size=size, p=[w for w, _ in parts])
        out = np.empty(size)
        for i, (_, part) in enumerate(parts):
            mask = which == i
            out[mask] = part(rng, int(mask.sum()))
        return out

    return draw


def at(p: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, size: np.full(size, p)


def beta(a: float, b: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, size: rng.beta(a, b, size)


POPULATIONS: dict[str, Population] = {
    "40% at 0, rest Beta(2,3)": mixture((0.4, at(0.0)), (0.6, beta(2, 3))),
    "15% at 0, 25% at 1, rest uniform": mixture(
        (0.15, at(0.0)), (0.25, at(1.0)), (0.6, beta(1, 1))
    ),
    "60% at 0, rest Beta(1,4)": mixture((0.6, at(0.0)), (0.4, beta(1, 4))),
    "half at 0.05, half at 0.8": mixture((0.5, at(0.05)), (0.5, at(0.8))),
    "all at 0.3": mixture((1.0, at(0.3))),
    "Beta(0.4,0.6)": mixture((1.0, beta(0.4, 0.6))),
}
# Rollouts per sample (fixed: n_lo = n_hi) and the group size of the report.
DESIGNS = [((8, 8), 4), ((8, 8), 16), ((4, 4), 8), ((2, 12), 8)]


def u(p: np.ndarray, g: int) -> np.ndarray:
    """The chance that a group of g is mixed at pass rate p."""
    return 1.0 - p**g - (1.0 - p) ** g


def true_multiplier(p: np.ndarray, g: int) -> int:
    """The multiplier rule of `curate.stats.dataset.compute_multiplier` on the truth."""
    curve = {m: float(np.mean(u(p, g * m))) for m in range(1, MAX_MULTIPLIER + 2)}
    return next(
        (m for m in range(1, MAX_MULTIPLIER + 1) if curve[m + 1] - curve[m] < MULTIPLIER_MIN_GAIN),
        MAX_MULTIPLIER,
    )


def binary_rollouts(p: np.ndarray, n_lo: int, n_hi: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.integers(n_lo, n_hi + 1, p.size)
    return long_format([(rng.random(k) < q).astype(float) for q, k in zip(p, n, strict=True)])


def check_fixed(p: np.ndarray, frame: pl.DataFrame, g: int) -> list[str]:
    """Every mixed-group figure of the report against the truth; the failures, in words."""
    analysis = analyze(frame, group_size=g)
    s, m = analysis.summary, analysis.summary.compute_multiplier
    fewest = s.rollouts_per_sample["min"]
    sizes = sorted({g * k for k in range(1, MAX_MULTIPLIER + 2)})
    table = gate_curve(
        analysis.per_sample,
        analysis.prior,
        sizes,
        binary=analysis.binary,
        model=analysis.model,
        intervals=True,
    )
    per = analysis.per_sample.sort("sample_id")
    out: list[str] = []
    for size, value, low, high in table.rows():
        truth = float(np.mean(u(p, size)))
        if size <= fewest or low is None:
            # Observed (or no interval): the point must be right. At G its standard
            # error is the per-sample estimates' against the truth; elsewhere a bound on
            # it (an estimate in [0, 1] with mean v has a variance of at most v(1 - v)).
            if size == g:
                se = _se_of_mean(per["gate_open_probability"].to_numpy(), u(p, g))
            else:
                se = math.sqrt(truth * (1 - truth) / SAMPLES)
            tol = max(Z * se, FLOOR)
            if abs(value - truth) > tol:
                out.append(f"G={size}: {value:.4f} vs truth {truth:.4f} (tol {tol:.4f})")
        elif not low - 1e-9 <= truth <= high + 1e-9:
            out.append(f"G={size}: truth {truth:.4f} outside [{low:.4f}, {high:.4f}]")
    head = s.gate["expected_open_fraction"]
    assert head == dict(table.select("group_size", "expected_open_fraction").rows())[g]
    if m.decided and m.recommended_range is not None:
        want = true_multiplier(p, g)
        if m.recommended != want:
            out.append(f"multiplier {m.recommended}x, the true curve's {want}x")
    elif m.recommended_range is None and m.recommended != true_multiplier(p, g):
        out.append(f"multiplier {m.recommended}x (no interval), truth {true_multiplier(p, g)}x")
    return out


def unbiased_gate(c: int, n: int, g: int) -> float:
    return 1 - (math.comb(c, g) + math.comb(n - c, g)) / math.comb(n, g)


def _se_of_mean(estimates: np.ndarray, truth: np.ndarray) -> float:
    return float(np.std(estimates - truth)) / math.sqrt(truth.size)


@pytest.mark.parametrize(("counts", "g"), DESIGNS, ids=lambda d: str(d))
@pytest.mark.parametrize("name", list(POPULATIONS))
def test_every_mixed_group_figure_on_real_shaped_populations(
    name: str, counts: tuple[int, int], g: int
) -> None:
    seed = zlib.crc32(f"{name} {counts} {g}".encode())
    p = POPULATIONS[name](np.random.default_rng(seed), SAMPLES)
    frame = binary_rollouts(p, *counts, seed=seed + 1)
    assert not check_fixed(p, frame, g)


def test_the_beta_prior_fails_the_same_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's first row: 40% exactly 0, rest Beta(2,3), N = 8. With the Beta prior
    curate used before (no interval, the point alone) mixed groups at G = 16 are far
    off and the multiplier is wrong; the same check passes with the NPMLE above."""
    rng = np.random.default_rng(7)
    p = POPULATIONS["40% at 0, rest Beta(2,3)"](rng, SAMPLES)
    frame = binary_rollouts(p, 8, 8, seed=8)
    assert not check_fixed(p, frame, 8)

    def beta_prior(aggregated: pl.DataFrame) -> object:
        hist = pair_histogram(aggregated, scored_only=True)
        return fit_beta_prior((n, float(c), w) for n, c, w in hist)

    monkeypatch.setattr(analysis_module, "fit_prior", beta_prior)
    failures = check_fixed(p, frame, 8)
    assert any(f.startswith("G=16") for f in failures), failures
    assert any(f.startswith("multiplier") for f in failures), failures


# -- partial credit ---------------------------------------------------------------------
def judge_like(seed: int, n: int) -> tuple[pl.DataFrame, np.ndarray]:
    """Scores 0, 0.5, 1: 30% of prompts give 0.5 every time (a judge's fixed verdict),
    the rest draw each value at Dirichlet(1, 1, 1) rates. Returns rollouts and rates."""
    rng = np.random.default_rng(seed)
    rates = rng.dirichlet((1.0, 1.0, 1.0), SAMPLES)
    fixed = rng.random(SAMPLES) < 0.3
    rates[fixed] = (0.0, 1.0, 0.0)
    values = np.array([0.0, 0.5, 1.0])
    scores = [values[rng.choice(3, size=n, p=r)] for r in rates]
    return long_format(scores), rates


@pytest.mark.parametrize("n", [6, 8])
def test_partial_credit_with_prompts_that_always_give_the_same_score(n: int) -> None:
    frame, rates = judge_like(seed=n, n=n)
    analysis = analyze(frame, group_size=8)
    sizes = [8, 16, 32]
    table = gate_curve(
        analysis.per_sample,
        analysis.prior,
        sizes,
        binary=False,
        model=analysis.model,
        intervals=True,
    )
    for size, value, low, high in table.rows():
        truth = float(np.mean(1.0 - (rates**size).sum(axis=1)))
        if size <= n:
            assert low is None and abs(value - truth) < FLOOR, (size, value, truth)
        else:
            assert low is not None and low - 1e-9 <= truth <= high + 1e-9, (size, low, truth, high)


# -- adaptive ---------------------------------------------------------------------------
ADAPTIVE = ["40% at 0, rest Beta(2,3)", "half at 0.05, half at 0.8", "Beta(0.4,0.6)"]


@pytest.mark.parametrize("name", ADAPTIVE)
def test_adaptive_figures_on_real_shaped_populations(name: str) -> None:
    """The policy stops a sample once it is mixed (cap 8); the model-based mean score,
    pass@2 and mixed groups at G = 4 must match the population, as the fixed-N run of
    the same outcome sequences does."""
    cap, g = 8, 4
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    p = POPULATIONS[name](rng, SAMPLES)
    seqs = (rng.random((SAMPLES, cap)) < p[:, None]).astype(float)
    ids = [f"s{i:05d}" for i in range(SAMPLES)]
    trace = replay(AdaptivePolicy(max_runs=cap), dict(zip(ids, seqs.tolist(), strict=True)))
    adaptive = analyze(
        long_format([np.array(trace.outcomes[i]) for i in ids]),
        adaptive=True,
        nominal_runs=cap,
        group_size=g,
    ).summary
    c = seqs.sum(axis=1)
    terms = {  # each figure's per-sample fixed-N estimator on the full sequences
        "mean score": (adaptive.mean_score, c / cap, p),
        "pass@2": (
            adaptive.pass_at_k["2"],
            1 - (cap - c) * (cap - c - 1) / (cap * (cap - 1)),
            1 - (1 - p) ** 2,
        ),
        "mixed at G=4": (
            adaptive.gate["expected_open_fraction"],
            np.array(
                [
                    1 - (math.comb(int(k), g) + math.comb(cap - int(k), g)) / math.comb(cap, g)
                    for k in c
                ]
            ),
            u(p, g),
        ),
    }
    for what, (value, estimates, truth) in terms.items():
        tol = max(Z * _se_of_mean(estimates, truth), FLOOR)
        assert abs(value - float(np.mean(truth))) <= tol, (what, value, float(np.mean(truth)))


def test_no_interval_for_a_histogram_too_long_to_bound() -> None:
    """A run whose samples have hundreds of distinct (n, c) pairs (a budget run without a
    cap) gets its figures but no interval (null in the JSON), rather than a report that
    takes minutes."""
    from curate.stats.intervals import MAX_ROWS

    rng = np.random.default_rng(3)
    n = rng.integers(1, 80, 3000)
    p = rng.beta(0.5, 0.5, 3000)
    frame = long_format([(rng.random(k) < q).astype(float) for q, k in zip(p, n, strict=True)])
    analysis = analyze(frame, group_size=8)
    assert analysis.prior.likelihood.counts.size > MAX_ROWS
    assert analysis.summary.gate["interval"] is None
    assert analysis.summary.compute_multiplier.recommended_range is None
