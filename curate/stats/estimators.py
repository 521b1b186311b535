"""Scalar estimators on (n, c) counts: pass@k, the gate, Wilson, Beta-binomial fit.

They run once per distinct (n, c) pair, never per sample: a data set of a million
samples with 8 rollouts each has at most 9 distinct pairs per rollout count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), in product form."""
    if k > n or k < 1:
        raise ValueError(f"pass@k needs 1 <= k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    # C(n-c,k)/C(n,k) = prod_{i=n-c+1}^{n} (1 - k/i): stable, no big integers.
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def choose_ratio(a: int, n: int, g: int) -> float:
    """C(a, g) / C(n, g) for 0 <= a <= n, g <= n (0 when a < g)."""
    if a < g:
        return 0.0
    out = 1.0
    for i in range(g):
        out *= (a - i) / (n - i)
    return out


def gate_open_unbiased(n: int, c: int, group_size: int) -> float:
    """P(a group of G drawn from these n outcomes is mixed), unbiased for n >= G.

    1 - C(c,G)/C(n,G) - C(n-c,G)/C(n,G): drawing G of the n observed rollouts
    without replacement is an unbiased estimate of G fresh draws.
    """
    if group_size > n:
        raise ValueError("the unbiased gate estimator needs n >= group size")
    if group_size <= 1:
        return 0.0
    return max(0.0, 1.0 - choose_ratio(c, n, group_size) - choose_ratio(n - c, n, group_size))


def gate_open_bernoulli(p: float, group_size: int) -> float:
    """u(p) = 1 - (1-p)^G - p^G: the gate-open probability at pass rate p."""
    if group_size <= 1:
        return 0.0
    return max(0.0, 1.0 - (1.0 - p) ** group_size - p**group_size)


def gate_open_posterior(n: int, c: int, alpha: float, beta: float, group_size: int) -> float:
    """P(a fresh group of G rollouts is mixed) given c passes in n, under a Beta(alpha,
    beta) prior on the pass rate: 1 - E[p^G] - E[(1-p)^G] over the posterior
    Beta(alpha + c, beta + n - c), with E[p^G] = prod_{i<G} (a + i) / (a + b + i).

    Calibrated where u(p~) on the posterior mean is not: u is concave near 0 and 1, so
    plugging in the mean overstates how often a sample with few or no passes would mix
    in a bigger group (Jensen's inequality).
    """
    if group_size <= 1:
        return 0.0
    a, b = alpha + c, beta + n - c
    all_pass = all_fail = 1.0
    for i in range(group_size):
        all_pass *= (a + i) / (a + b + i)
        all_fail *= (b + i) / (a + b + i)
    return max(0.0, 1.0 - all_pass - all_fail)


def wilson_interval(successes: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default)."""
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At p = 0 (p = 1) the bound is exactly 0 (1); rounding would leave ~1e-17 off it.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return (low, high)


def beta_moment(a: float, b: float, k: int) -> float:
    """E[p^k] under Beta(a, b): B(a + k, b) / B(a, b) = prod_{i<k} (a + i) / (a + b + i)."""
    out = 1.0
    for i in range(k):
        out *= (a + i) / (a + b + i)
    return out


def beta_binomial_pmf(m: int, a: float, b: float) -> list[float]:
    """P(X = x), x = 0..m, for X ~ BetaBinomial(m, a, b): the posterior predictive count
    of passes in m more draws of a sample whose pass rate has posterior Beta(a, b)."""
    log_beta0 = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    pmf = [
        math.exp(
            math.lgamma(m + 1)
            - math.lgamma(x + 1)
            - math.lgamma(m - x + 1)
            + math.lgamma(x + a)
            + math.lgamma(m - x + b)
            - math.lgamma(m + a + b)
            - log_beta0
        )
        for x in range(m + 1)
    ]
    total = sum(pmf)  # 1 up to rounding; renormalised so the weights sum to exactly 1
    return [q / total for q in pmf]


@dataclass(frozen=True, slots=True)
class BetaPrior:
    """Beta(alpha, beta) prior on per-sample pass rates.

    The prior curate fitted before the NPMLE (`curate.stats.prior`), with the same
    interface (`curate.stats.prior.Prior`); no figure uses it any more: it stays for
    the before/after comparison (benchmarks/bench_prior.py) and the tests of that."""

    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def smooth(self, successes: float, n: int) -> float:
        """Posterior mean pass rate: (c + alpha) / (n + alpha + beta)."""
        return (successes + self.alpha) / (n + self.alpha + self.beta)

    def post_moment(self, n: int, c: float, a: int, b: int = 0) -> float:
        """E[p^a (1 - p)^b | c of n] under the posterior Beta(alpha + c, beta + n - c)."""
        pa, pb = self.alpha + c, self.beta + n - c
        out = 1.0
        for i in range(a):
            out *= (pa + i) / (pa + pb + i)
        for i in range(b):
            out *= (pb + i) / (pa + pb + a + i)
        return out

    def predictive(self, n: int, c: int, m: int) -> list[float]:
        return beta_binomial_pmf(m, self.alpha + c, self.beta + n - c)

    def mirror(self) -> BetaPrior:
        return BetaPrior(self.beta, self.alpha)

    def summary(self) -> dict[str, object]:
        return {"alpha": self.alpha, "beta": self.beta, "kind": "beta", "mean": self.mean}


_MIN_STRENGTH, _MAX_STRENGTH = 1e-2, 1e4
_MIN_MEAN = 1e-4


def fit_beta_prior(counts: Iterable[tuple[int, float, int]]) -> BetaPrior:
    """Empirical-Bayes Beta prior by maximum marginal (beta-binomial) likelihood.

    `counts` holds (n, c, how many samples have that pair). The search runs over
    the prior mean and log strength (alpha + beta), starting from the method of
    moments; the strength is bounded so an all-same data set still gives a prior.
    """
    # Sorted, so the floating-point sums (and the fit) do not depend on input order.
    rows = sorted((n, c, w) for n, c, w in counts if n > 0 and w > 0)
    if not rows:
        return BetaPrior(1.0, 1.0)
    total_w = sum(w for _, _, w in rows)
    mu0 = sum(w * c for n, c, w in rows) / sum(w * n for n, c, w in rows)
    mu0 = min(max(mu0, _MIN_MEAN), 1 - _MIN_MEAN)
    # Method of moments: between-sample variance of p beyond binomial noise.
    rates = [(c / n, n, w) for n, c, w in rows]
    var_p = sum(w * (r - mu0) ** 2 for r, _, w in rates) / total_w
    noise = sum(w * mu0 * (1 - mu0) / n for _, n, w in rates) / total_w
    between = var_p - noise
    s0 = mu0 * (1 - mu0) / between - 1.0 if between > 1e-12 else _MAX_STRENGTH
    log_s = math.log(min(max(s0, _MIN_STRENGTH), _MAX_STRENGTH))

    def loglik(mu: float, ls: float) -> float:
        s = math.exp(ls)
        a, b = mu * s, (1 - mu) * s
        lb = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
        out = 0.0
        for n, c, w in rows:
            out += w * (math.lgamma(c + a) + math.lgamma(n - c + b) - math.lgamma(n + a + b) - lb)
        return out

    mu, ls = mu0, log_s
    lo_ls, hi_ls = math.log(_MIN_STRENGTH), math.log(_MAX_STRENGTH)
    for _ in range(6):  # coordinate ascent; each step a golden-section search
        ls = _golden_max(lambda x, m=mu: loglik(m, x), lo_ls, hi_ls)
        mu = _golden_max(lambda x, s=ls: loglik(x, s), _MIN_MEAN, 1 - _MIN_MEAN)
    s = math.exp(ls)
    return BetaPrior(alpha=mu * s, beta=(1 - mu) * s)


def _golden_max(f, lo: float, hi: float, iters: int = 60) -> float:  # type: ignore[no-untyped-def]
    inv_phi = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - inv_phi * (b - a), a + inv_phi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - inv_phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv_phi * (b - a)
            fd = f(d)
    return (a + b) / 2
