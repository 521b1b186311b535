"""Data-set figures of an adaptive run that survive optional stopping.

`curate eval --adaptive` stops drawing a sample once its outcomes are mixed, so a
stopped sample's c/n is biased (a sample at p = 0.05 that passes on its second draw
stops at 1/2), and so is every figure built on raw rates: mean score, pass@k, the
gate's fixed-n estimator, the high-variance split.

What survives: the likelihood of an observed outcome sequence, prod p^c (1-p)^(n-c),
does not involve a stopping rule that looks only at past outcomes. So the pass-rate
prior fitted by maximum marginal likelihood (the NPMLE of `curate.stats.prior`, which
drops the binomial coefficient, a factor free of the prior, for the same reason) and
each sample's posterior given (n, c) are valid as they are.

Every figure here is the one a fixed-N run would print (N: the run's nominal rollouts
per sample, its cap), in expectation given what the adaptive run saw:

    figure = mean over samples of E[T_N(c + X) | n, c],  X | p ~ Binomial(N - n, p),
                                                       p ~ the posterior given (n, c)

where T_N(C) is the fixed-N run's per-sample estimator at C passes in N (C/N for the
mean score, unbiased pass@k, 1[C > 0] for best-of-N, the unbiased gate where N >= G
and the posterior predictive beyond, the high-variance test on C/N). By the tower
property each sample's term has the expectation of the fixed-N estimator, so the
figure is unbiased for what that estimator estimates (E[p], E[1 - (1-p)^k], ...) when
the prior fits the population. A sample that reached N is exactly its fixed-N term
(no model); one that stopped early (necessarily mixed) is completed by the posterior
predictive of the draws it skipped. Samples with more than N rollouts (a budget with
no cap) use the posterior expectation of the figure's target: E[p], E[1 - (1-p)^k]...
Labels (always correct / always incorrect / mixed) are exact at the cap and not
touched. Pure functions of the (n, c, samples) histogram and the prior.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curate.core.outcome import VARIANCE_TOLERANCE
from curate.stats.estimators import beta_binomial_pmf, beta_moment, pass_at_k
from curate.stats.per_sample import gate_forecast

if TYPE_CHECKING:
    from curate.stats.prior import Prior

__all__ = [
    "ESTIMATOR",
    "MODEL_BASED",
    "AdaptiveFigures",
    "adaptive_figures",
    "adaptive_gate",
    "beta_binomial_pmf",
    "beta_moment",
    "completed",
    "high_variance",
    "model_based_note",
    "nominal_runs",
]

# The summary keys (`DatasetSummary.to_dict()`) whose values are model-based on an
# adaptive run, and the note that says how.
MODEL_BASED: tuple[str, ...] = (
    "mean_score",
    "best_of_n",
    "potential_gain",
    "relative_gain",
    "high_variance_fraction",
    "pass_at_k",
    "gate",
    "compute_multiplier",
)
ESTIMATOR = (
    "adaptive run: stopping a sample once it is mixed biases its raw pass rate c/n; each "
    "figure is the expected value of the fixed-N run's estimator at the nominal N, given "
    "the outcomes seen, under the empirical-Bayes pass-rate prior (the NPMLE; a sample that "
    "stopped early is completed by its posterior given (n, c), which the stopping rule leaves "
    "valid; "
    "one that reached N counts as observed); the category labels are exact"
)

Histogram = Sequence[tuple[int, int, int]]


@dataclass(frozen=True)
class AdaptiveFigures:
    """The model-based figures of one adaptive run (see the module docstring)."""

    nominal_runs: int
    mean_score: float
    best_of_n: float
    pass_at_k: dict[int, float]
    gate: float  # expected share of mixed groups at `group_size`
    high_variance_fraction: float
    open_fractions: dict[int, float]  # group size -> expected mixed share (multiplier curve)


def completed(
    hist: Histogram,
    prior: Prior,
    nominal: int,
    at_nominal: Sequence[float],
    beyond: Callable[[int, int], float],
    observed: Callable[[int, int], float] | None = None,
) -> float:
    """Mean over samples of E[T_N(C) | n, c] (the module docstring's figure).

    `at_nominal[C]` is T_N at C passes in N = `nominal`; `beyond(n, c)` the posterior
    expectation of T's target for a sample with n > N; `observed(n, c)`, when given,
    replaces it there (a figure defined by the sample's own label).
    """
    total = weight = 0.0
    for n, c, w in hist:
        if n <= 0 or w <= 0:
            continue
        if n <= nominal:
            # C = c + X: the passes a fixed-N run would have seen, X of them still unseen.
            pmf = prior.predictive(n, c, nominal - n)
            value = sum(q * at_nominal[c + x] for x, q in enumerate(pmf))
        else:
            value = observed(n, c) if observed is not None else beyond(n, c)
        total += w * value
        weight += w
    return total / weight if weight else math.nan


def high_variance(c: int, n: int, threshold: float) -> bool:
    """The high-variance test of `category_expr` for c passes in n binary outcomes."""
    if c <= 0 or c >= n:
        return False
    rate = c / n
    return rate * (1.0 - rate) > threshold + VARIANCE_TOLERANCE


def adaptive_gate(hist: Histogram, prior: Prior, nominal_runs: int, group_size: int) -> float:
    """Mixed groups at `group_size` for an adaptive run (0/1 scores): what a fixed-N run
    uses per sample (unbiased where N >= G, the posterior predictive beyond; both have
    expectation E[u_G(p)]), completed from each stopped sample's posterior. The one
    function behind the headline, the multiplier and the gate plot of such a run."""
    big_n, g = max(1, nominal_runs), group_size
    # The per-sample estimator every fixed-N figure uses, at C passes in N.
    table = [gate_forecast(big_n, c, prior, g) for c in range(big_n + 1)]
    return completed(
        hist,
        prior,
        big_n,
        table,
        lambda n, c: 1.0 - prior.post_moment(n, c, g) - prior.post_moment(n, c, 0, g),
    )


def adaptive_figures(
    hist: Histogram,
    prior: Prior,
    *,
    nominal_runs: int,
    group_size: int,
    threshold: float,
    group_sizes: Iterable[int] = (),
) -> AdaptiveFigures:
    """Every model-based figure of an adaptive run from its (n, c, samples) histogram
    of scored samples (0/1 scores) and the prior fitted on it."""
    big_n = max(1, nominal_runs)
    passes = range(big_n + 1)

    def gate_at(g: int) -> float:
        return adaptive_gate(hist, prior, big_n, g)

    def pass_at(k: int) -> float:
        table = [pass_at_k(big_n, c, k) for c in passes]
        return completed(
            hist, prior, big_n, table, lambda n, c: 1.0 - prior.post_moment(n, c, 0, k)
        )

    pass_k = {k: pass_at(k) for k in range(1, big_n + 1)}
    high = completed(
        hist,
        prior,
        big_n,
        [float(high_variance(c, big_n, threshold)) for c in passes],
        lambda n, c: math.nan,
        observed=lambda n, c: float(high_variance(c, n, threshold)),
    )
    sizes = sorted({group_size, *group_sizes})
    curve = {g: gate_at(g) for g in sizes}
    return AdaptiveFigures(
        nominal_runs=big_n,
        mean_score=pass_k[1],  # pass@1 = C/N in expectation: the mean score of 0/1 scores
        best_of_n=pass_k[big_n],  # unbiased pass@N at C passes in N is 1[C > 0]
        pass_at_k=pass_k,
        gate=curve[group_size],
        high_variance_fraction=high,
        open_fractions=curve,
    )


def nominal_runs(manifest: Mapping[str, Any] | None) -> int | None:
    """An adaptive run's nominal rollouts per sample: its policy's cap, else the
    run's --rollouts (a budget with no cap); None when the manifest gives neither."""
    if not manifest:
        return None
    policy = manifest.get("adaptive_policy") or {}
    for value in (policy.get("max_runs"), manifest.get("runs")):
        if isinstance(value, int) and value >= 1:
            return value
    return None


_READABLE = {
    "mean_score": "mean score",
    "best_of_n": "best-of-N",
    "potential_gain": "potential and relative gain",
    "high_variance_fraction": "high-variance share",
    "pass_at_k": "pass@k",
    "gate": "mixed groups",
    "compute_multiplier": "compute multiplier",
}


def model_based_note(summary: Mapping[str, Any]) -> str | None:
    """The report's one line on an adaptive run's model-based figures (None otherwise);
    `summary` is `DatasetSummary.to_dict()`."""
    names = summary.get("model_based")
    if not names:
        return None
    shown = [_READABLE[name] for name in names if name in _READABLE]
    return (
        f"adaptive run: {', '.join(shown)} are model-based at N = {summary.get('nominal_runs')} "
        "(sampling stopped once a sample was mixed, which biases raw pass rates; estimated "
        "under the fitted pass-rate prior); category counts are exact"
    )
