"""Adaptive runs: the report's figures survive optional stopping.

Samples with pass rates p ~ Beta(a, b) draw outcome sequences; the real policy
(`replay` through `AdaptivePolicy`, default round size, cap N) decides where each
stops; the report's figures on what it saw are compared with the population's closed
forms. The model-based figures must sit within Z standard errors of the truth; the
raw-rate figures of the same run (the fixed-N estimators) must miss it, so the check
can fail. The standard error is the exact one of a fixed-N run of the same size (the
model-based figure conditions that run's estimator on what was seen, so it varies
less). The truths and errors here are written independently of curate.stats.adaptive.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curate.evaluation.adaptive import AdaptivePolicy, replay
from curate.report.render import render_json, render_markdown
from curate.stats import analyze
from curate.stats.adaptive import (
    MODEL_BASED,
    adaptive_figures,
    beta_binomial_pmf,
    beta_moment,
    completed,
    nominal_runs,
)
from curate.stats.estimators import BetaPrior, fit_beta_prior
from curate.stats.multiplicity import MULTIPLICITY
from curate.stats.per_sample import binary_aggregate
from curate.stats.prior import fit_prior_counts
from tests.conftest import long_frame

SAMPLES = 100_000
Z = 4.0
POPULATIONS = [(2.0, 14.0), (0.4, 0.6), (5.0, 2.0)]
CAPS = [4, 8, 16]
Hist = list[tuple[int, int, int]]


# -- the population's truth, independent of curate -------------------------------
def moment(a: float, b: float, k: int) -> float:
    """E[p^k] under Beta(a, b), through log-gamma."""
    return math.exp(
        math.lgamma(a + k) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(a + b + k)
    )


def bb(n: int, a: float, b: float) -> list[float]:
    """Beta-binomial pmf with integer binomials."""
    log_b = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return [
        math.comb(n, c)
        * math.exp(math.lgamma(c + a) + math.lgamma(n - c + b) - math.lgamma(n + a + b) - log_b)
        for c in range(n + 1)
    ]


def is_high(c: int, n: int, threshold: float) -> float:
    return float(0 < c < n and (c / n) * (1 - c / n) > threshold + 1e-12)


def fixed_terms(a: float, b: float, n: int, g: int, t: float) -> dict[str, Callable[[int], float]]:
    """Per-sample terms of a fixed-n run's estimators at c passes in n, by figure."""

    def gate(c: int) -> float:
        if n >= g:
            return 1 - (math.comb(c, g) + math.comb(n - c, g)) / math.comb(n, g)
        return 1 - moment(a + c, b + n - c, g) - moment(b + n - c, a + c, g)

    terms: dict[str, Callable[[int], float]] = {
        "mean_score": lambda c: c / n,
        "best_of_n": lambda c: float(c > 0),
        "potential_gain": lambda c: float(c > 0) - c / n,
        "high_variance_fraction": lambda c: is_high(c, n, t),
        "gate": gate,
    }
    for k in range(1, n + 1):
        terms[f"pass@{k}"] = lambda c, k=k: 1 - math.comb(n - c, k) / math.comb(n, k)
    return terms


def truth_and_se(a: float, b: float, n: int, g: int, t: float) -> dict[str, tuple[float, float]]:
    """(population value, standard error of a fixed-n run of SAMPLES samples) by figure."""
    pmf = bb(n, a, b)
    out = {}
    for name, term in fixed_terms(a, b, n, g, t).items():
        mean = sum(w * term(c) for c, w in enumerate(pmf))
        var = sum(w * (term(c) - mean) ** 2 for c, w in enumerate(pmf))
        out[name] = (mean, math.sqrt(var / SAMPLES))
    # The estimators are unbiased, so their means are the truths; check two closed forms.
    assert out["mean_score"][0] == pytest.approx(a / (a + b))
    assert out[f"pass@{n}"][0] == pytest.approx(1 - moment(b, a, n))
    mean, se_mean = out["mean_score"]
    gain, se_gain = out["potential_gain"]
    out["relative_gain"] = (gain / mean, se_gain / mean + gain * se_mean / mean**2)
    return out


# -- the adaptive run -------------------------------------------------------------
def adaptive_histogram(a: float, b: float, cap: int, seed: int) -> Hist:
    """(n, c, samples) of SAMPLES samples run through the default policy with cap `cap`.

    Without a budget the policy decides each sample on its own outcomes, and with one
    draw per round it sees a sequence up to its first change of outcome (or all `cap`).
    So the distinct such prefixes (at most 2 * cap) are replayed, each standing for the
    samples whose sequence starts with it: the real policy, at any population size.
    """
    rng = np.random.default_rng(seed)
    p = rng.beta(a, b, SAMPLES)
    seqs = rng.random((SAMPLES, cap)) < p[:, None]
    changed = seqs != seqs[:, :1]
    mixed = changed.any(axis=1)
    length = np.where(mixed, changed.argmax(axis=1) + 1, cap)
    prefixes = Counter(zip(seqs[:, 0].tolist(), length.tolist(), mixed.tolist(), strict=True))
    sequences = {
        key: [float(x0)] * (m - 1) + [float(x0 != mix)] for key in prefixes for x0, m, mix in [key]
    }
    trace = replay(AdaptivePolicy(max_runs=cap), {str(k): v for k, v in sequences.items()})
    hist: Counter[tuple[int, int]] = Counter()
    for key, seq in sequences.items():
        seen = trace.outcomes[str(key)]
        assert seen == seq, f"the policy saw {seen}, not the prefix {seq}"
        hist[(len(seen), int(sum(seen)))] += prefixes[key]
    return sorted((n, c, w) for (n, c), w in hist.items())


def report(hist: Hist, *, adaptive: bool, cap: int, g: int, t: float) -> dict[str, float]:
    """The figures `curate report` prints, from the compressed (n, c) histogram (the
    report's own path), by the names of `fixed_terms`."""
    counts = pl.DataFrame(
        hist, schema=["n_rollouts", "successes", MULTIPLICITY], orient="row"
    ).with_columns(pl.lit(0).alias("n_errors"))
    empty = pl.DataFrame(schema={"sample_id": pl.String, "score": pl.Float64, "error": pl.String})
    s = analyze(
        empty,
        aggregate=binary_aggregate(counts),
        adaptive=adaptive,
        nominal_runs=cap,
        group_size=g,
        threshold=t,
    ).summary
    out = {
        "mean_score": s.mean_score,
        "best_of_n": s.best_of_n,
        "potential_gain": s.potential_gain,
        "relative_gain": s.relative_gain,
        "high_variance_fraction": s.high_variance_fraction,
        "gate": s.gate["expected_open_fraction"],
    }
    out.update({f"pass@{k}": v for k, v in s.pass_at_k.items()})
    return {k: float(v) for k, v in out.items() if v is not None}


def fit_se(hist: Hist, cap: int, g: int, t: float, replicates: int = 40) -> dict[str, float]:
    """Standard error each model-based figure inherits from the fitted prior (the NPMLE,
    whose spread no two-parameter formula gives): the standard deviation of the figures
    over a bootstrap of the samples, each replicate refitted."""
    rng = np.random.default_rng(cap * 7 + g)
    weights = np.array([w for _, _, w in hist], dtype=float)
    draws: dict[str, list[float]] = {}
    for _ in range(replicates):
        counts = rng.multinomial(int(weights.sum()), weights / weights.sum())
        resampled = [(n, c, int(k)) for (n, c, _), k in zip(hist, counts, strict=True) if k]
        prior = fit_prior_counts((n, float(c), w) for n, c, w in resampled)
        fig = adaptive_figures(resampled, prior, nominal_runs=cap, group_size=g, threshold=t)
        out = {"mean_score": fig.mean_score, "best_of_n": fig.best_of_n, "gate": fig.gate}
        out |= {"high_variance_fraction": fig.high_variance_fraction}
        out |= {"potential_gain": fig.best_of_n - fig.mean_score}
        out |= {"relative_gain": fig.best_of_n / fig.mean_score - 1}
        out |= {f"pass@{k}": v for k, v in fig.pass_at_k.items()}
        for name, value in out.items():
            draws.setdefault(name, []).append(value)
    # The bootstrap spread includes the run's own sampling error, which `misses` adds
    # again: a slightly generous tolerance, never a tighter one.
    return {name: float(np.std(values, ddof=1)) for name, values in draws.items()}


def misses(
    figures: dict[str, float], truth: dict[str, tuple[float, float]], fit: dict[str, float]
) -> dict[str, str]:
    """The figures more than Z standard errors from the truth, with what they say."""
    out = {}
    for name, (value, se_run) in truth.items():
        se = math.hypot(se_run, fit[name])
        if name in figures and abs(figures[name] - value) > Z * se:
            out[name] = f"{figures[name]:.4f} vs {value:.4f} (se {se:.4f})"
    return out


@pytest.mark.parametrize("cap", CAPS)
@pytest.mark.parametrize("ab", POPULATIONS, ids=lambda ab: f"Beta{ab}")
def test_adaptive_figures_are_calibrated_and_raw_ones_are_not(
    ab: tuple[float, float], cap: int
) -> None:
    a, b = ab
    hist = adaptive_histogram(a, b, cap, seed=cap * 1000 + int(10 * a))
    # The default gate and threshold, then ones where the gate needs n >= G and the
    # high-variance test is not just "mixed".
    for g, t in [(8, 0.01), (cap // 2, 0.2)]:
        truth, fit = truth_and_se(a, b, cap, g, t), fit_se(hist, cap, g, t)
        model = report(hist, adaptive=True, cap=cap, g=g, t=t)
        assert set(model) == set(truth)
        assert not misses(model, truth, fit), misses(model, truth, fit)
        raw = report(hist, adaptive=False, cap=cap, g=g, t=t)
        assert misses(raw, truth, fit), "the raw-rate figures should miss the truth"


# -- the pieces -------------------------------------------------------------------
def test_beta_binomial_pmf_and_moments_match_integer_forms() -> None:
    for m, a, b in [(0, 0.5, 2.0), (5, 0.3, 0.7), (12, 4.0, 9.0)]:
        assert beta_binomial_pmf(m, a, b) == pytest.approx(bb(m, a, b), rel=1e-9)
        assert sum(beta_binomial_pmf(m, a, b)) == pytest.approx(1.0, abs=1e-12)
    assert beta_moment(2.0, 3.0, 3) == pytest.approx(moment(2.0, 3.0, 3))
    assert beta_moment(2.0, 3.0, 0) == 1.0


def test_completion_counts_a_sample_at_the_cap_as_observed() -> None:
    prior = BetaPrior(0.7, 1.3)
    table = [0.0, 0.1, 0.5, 0.9]
    # n == N: the fixed-N term itself, whatever the prior.
    assert completed([(3, 2, 5)], prior, 3, table, lambda n, c: math.nan) == 0.5
    # n < N: the posterior predictive over the unseen draw.
    q = (0.7 + 1) / (0.7 + 1.3 + 2)  # P(next draw passes | 1 of 2)
    value = completed([(2, 1, 1)], prior, 3, table, lambda n, c: math.nan)
    assert value == pytest.approx((1 - q) * 0.1 + q * 0.5)
    # n > N: the posterior expectation given (n, c).
    assert completed([(5, 1, 1)], prior, 3, table, lambda n, c: prior.smooth(c, n)) == (
        pytest.approx(1.7 / 7.0)
    )


def test_an_adaptive_run_where_nothing_stopped_early_reports_the_fixed_figures() -> None:
    # Every sample at the cap (all-same, or mixed only at the last draw): no model at all.
    seqs = {"a": [1, 1, 1, 1], "b": [0, 0, 0, 0], "c": [0, 0, 0, 1], "d": [1, 1, 1, 0]}
    fixed = analyze(long_frame(seqs)).summary
    adaptive = analyze(long_frame(seqs), adaptive=True, nominal_runs=4).summary
    assert adaptive.mean_score == pytest.approx(fixed.mean_score)
    assert adaptive.best_of_n == pytest.approx(fixed.best_of_n)
    assert adaptive.high_variance_fraction == pytest.approx(fixed.high_variance_fraction)
    assert adaptive.pass_at_k == pytest.approx(fixed.pass_at_k)
    assert adaptive.categories == fixed.categories


def test_an_adaptive_summary_names_its_model_based_figures() -> None:
    seqs = {"a": [0, 1], "b": [0, 0, 0, 0], "c": [1, 0], "d": [1, 1, 1, 1], "e": [0, 0, 1]}
    summary = analyze(long_frame(seqs), adaptive=True, nominal_runs=4).summary
    assert list(summary.pass_at_k) == ["1", "2", "3", "4"]  # k up to N, not to the fewest n
    out = json.loads(render_json(summary, []))
    assert out["model_based"] == list(MODEL_BASED)
    assert out["nominal_runs"] == 4 and "stopped" in out["estimator"]
    for name in MODEL_BASED:
        assert name in out
    assert "model-based at N = 4" in render_markdown(summary, [])
    # Categories are the labels as seen: exact at the cap.
    assert summary.categories["always_incorrect"] == 1 and summary.categories["always_correct"] == 1
    fixed = analyze(long_frame(seqs)).summary.to_dict()
    assert "model_based" not in fixed and "model-based" not in render_markdown(
        analyze(long_frame(seqs)).summary, []
    )


def test_nominal_runs_from_the_manifest() -> None:
    assert nominal_runs({"runs": 8, "adaptive_policy": {"max_runs": 6}}) == 6
    assert nominal_runs({"runs": 8, "adaptive_policy": {"max_runs": None, "budget": 99}}) == 8
    assert nominal_runs({}) is None and nominal_runs(None) is None


def test_the_prior_fit_recovers_the_population_from_stopped_samples() -> None:
    # The sequence likelihood ignores the stopping rule, so the fit on adaptive counts
    # finds the population's Beta (the beta-binomial coefficient would only add a
    # constant: no change to the maximiser).
    hist = adaptive_histogram(2.0, 14.0, 8, seed=5)
    prior = fit_beta_prior((n, float(c), w) for n, c, w in hist)
    assert prior.mean == pytest.approx(2 / 16, abs=0.003)
    assert prior.alpha + prior.beta == pytest.approx(16, rel=0.1)


def test_filter_bounds_the_posterior_rate_on_an_adaptive_run(tmp_path: Path) -> None:
    from curate.filtering import FilterRequest, filter_run
    from curate.store.run_dir import RolloutStore

    # "s" passed on its second draw and stopped: raw 1/2, posterior far lower.
    seqs = {"s": [0, 1], **{f"h{i}": [0] * 7 + [1] for i in range(20)}, "z": [0] * 8}
    for adaptive, kept in [(False, 1), (True, 0)]:
        store = RolloutStore(tmp_path / f"run{adaptive}")
        store.create()
        manifest = {"model": "m", "runs": 8, "adaptive": adaptive}
        store.write_manifest(manifest | ({"adaptive_policy": {"max_runs": 8}} if adaptive else {}))
        store.write_samples(pl.DataFrame({"sample_id": list(seqs)}))
        store.append(long_frame(seqs))
        out = tmp_path / f"kept{adaptive}.jsonl"
        result = filter_run(
            FilterRequest(
                store.run_dir,
                out,
                keep=["all"],
                pass_rate="0.4:0.6",
                format="jsonl",
                allow_empty=True,
            )
        )
        assert result.kept == kept
        reasons = [r for r, _ in result.drop_reasons]
        if adaptive:
            assert any(r.startswith("smoothed_pass_rate ") for r in reasons), reasons
