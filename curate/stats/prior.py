"""The pass-rate prior every model-based figure uses: the nonparametric maximum-likelihood
estimate (NPMLE) of the distribution of pass rates across samples.

Each sample i has an unknown pass rate p_i drawn from a population distribution F, and
shows c_i passes in n_i rollouts. Every figure curate extrapolates past the rollouts it
took (mixed groups at a G larger than n, the multiplier curve, an adaptive run's
completed figures, smoothed rates) is an expectation under the posterior of p_i, so it is
only as good as the estimate of F.

F is estimated without assuming its shape (Kiefer and Wolfowitz 1956): the F that
maximises the marginal likelihood prod_i integral p^c_i (1 - p)^(n_i - c_i) dF(p) over
all distributions, restricted to a fixed grid of p. It is solved as Koenker and Mizera
(2014) do, through its convex dual (one variable per distinct (n, c) row; here by a
log-barrier Newton method), or, for very ragged histograms, by the EM iteration of Jiang
and Zhang (2009). The grid holds p = 0 and p = 1
exactly, so a block of prompts the model never (or always) solves is an atom, not the
tail of a Beta; several modes and a single point mass in the middle are held as they are;
a Beta-shaped population comes out as a discrete approximation of that Beta.

Sufficient statistics: the fit runs on the histogram of (n, c, samples), never per
sample (a million samples with 8 rollouts each are 9 rows).

Ragged n and adaptive stopping: the likelihood of one sample's outcome sequence is
p^c (1 - p)^(n - c) whatever decided n, as long as the decision to stop looked only at
outcomes already seen (a fixed N, a cap, "stop once mixed", a budget). The stopping rule
multiplies the probability of the observed sequence by a factor that does not involve p
(it is 1 or 0 for each path), so it drops out of every likelihood ratio, and the NPMLE
and every posterior below are the same as for a fixed design with those n. The binomial
coefficient is left out for the same reason.

`BetaPrior` (`curate.stats.estimators`) has the same interface; it is the prior curate
used before and stays reachable for the before/after comparison
(benchmarks/bench_prior.py), not for any figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

# The grid: exactly 0 and 1, and interior points evenly spaced in log-odds from
# logit = -GRID_LOGIT to +GRID_LOGIT (p from about 1.2e-4 to 1 - 1.2e-4), which puts the
# resolution where u_G(p) = 1 - p^G - (1 - p)^G changes fastest for large G.
GRID_POINTS = 241
GRID_LOGIT = 9.0
# The dual's barrier method stops when its duality gap (per sample) is below GAP; it
# serves histograms of up to DUAL_ROWS distinct (n, c) rows (a Newton step solves a
# rows x rows system), EM the longer ones. EM stops when an iteration raises the mean
# log-likelihood per sample by less than TOLERANCE, or after MAX_ITERATIONS.
GAP = 1e-9
NEWTON_STEPS = 100
POLISH_STEPS = 50
DUAL_ROWS = 400
TOLERANCE = 1e-11
MAX_ITERATIONS = 20000
# Atoms lighter than this are reported as zero in the JSON summary's support.
SHOWN_MASS = 1e-3


class Prior(Protocol):
    """What every model-based figure asks of the pass-rate prior."""

    @property
    def mean(self) -> float: ...

    def post_moment(self, n: int, c: float, a: int, b: int = 0) -> float:
        """E[p^a (1 - p)^b | c passes in n rollouts]."""
        ...

    def smooth(self, successes: float, n: int) -> float:
        """Posterior mean pass rate after `successes` in `n`."""
        ...

    def predictive(self, n: int, c: int, m: int) -> list[float]:
        """P(X = x), x = 0..m: passes in m more rollouts after c in n."""
        ...

    def mirror(self) -> Prior:
        """The prior of 1 - p (the rate of not passing)."""
        ...

    def summary(self) -> dict[str, Any]:
        """The report's `prior` object."""
        ...


def default_grid() -> NDArray[np.float64]:
    """0, GRID_POINTS interior points evenly spaced in log-odds, 1."""
    inner = 1.0 / (1.0 + np.exp(-np.linspace(-GRID_LOGIT, GRID_LOGIT, GRID_POINTS)))
    return np.concatenate([[0.0], inner, [1.0]])


def _log_kernel(
    grid: NDArray[np.float64], n: NDArray[np.float64], c: NDArray[np.float64]
) -> NDArray[np.float64]:
    """log p_j^c_i (1 - p_j)^(n_i - c_i), with 0^0 = 1 (log 0 = -inf elsewhere)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p, log_q = np.log(grid), np.log1p(-grid)
        a = np.where(c[:, None] > 0, c[:, None] * log_p[None, :], 0.0)
        b = np.where((n - c)[:, None] > 0, (n - c)[:, None] * log_q[None, :], 0.0)
    return a + b


@dataclass(frozen=True, eq=False)
class Likelihood:
    """The likelihood a fitted prior maximises, for the intervals
    (`curate.stats.intervals`): `kernel[i, j]` is the likelihood of histogram row i
    (c[i] passes in n[i]) at grid point j, each row scaled so its largest entry is 1,
    and `counts[i]` the samples in row i."""

    n: NDArray[np.float64]
    c: NDArray[np.float64]
    counts: NDArray[np.float64]
    kernel: NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class GridPrior:
    """A discrete distribution of pass rates: `weights[j]` at `atoms[j]`; `likelihood`
    is what it was fitted to (None for a prior built by hand or mirrored)."""

    atoms: NDArray[np.float64]
    weights: NDArray[np.float64]
    likelihood: Likelihood | None = field(default=None, repr=False)
    _cache: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)

    def __eq__(self, other: object) -> bool:
        """Equal atoms and weights (what the figures depend on)."""
        if not isinstance(other, GridPrior):
            return NotImplemented
        return bool(
            np.array_equal(self.atoms, other.atoms) and np.array_equal(self.weights, other.weights)
        )

    def __hash__(self) -> int:
        return hash((self.atoms.tobytes(), self.weights.tobytes()))

    @property
    def mean(self) -> float:
        return float(self.weights @ self.atoms)

    def posterior(self, n: int, c: float) -> NDArray[np.float64]:
        """Posterior weights on the atoms after c passes in n."""
        key = ("post", n, c)
        if (hit := self._cache.get(key)) is not None:
            return hit  # type: ignore[no-any-return]
        log_k = _log_kernel(self.atoms, np.array([float(n)]), np.array([float(c)]))[0]
        with np.errstate(divide="ignore"):
            log_post = log_k + np.log(self.weights)
        top = np.max(log_post)
        post = np.exp(log_post - top) if np.isfinite(top) else self.weights.copy()
        post /= post.sum()
        self._cache[key] = post
        return post

    def post_moment(self, n: int, c: float, a: int, b: int = 0) -> float:
        key = ("mom", n, c, a, b)
        if (hit := self._cache.get(key)) is not None:
            return hit  # type: ignore[no-any-return]
        post = self.posterior(n, c)
        value = float(post @ (self.atoms**a * (1.0 - self.atoms) ** b))
        self._cache[key] = value
        return value

    def smooth(self, successes: float, n: int) -> float:
        return self.post_moment(n, successes, 1, 0)

    def predictive(self, n: int, c: int, m: int) -> list[float]:
        post = self.posterior(n, c)
        x = np.arange(m + 1)
        comb = np.array([math.comb(m, int(k)) for k in x], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            kern = _log_kernel(self.atoms, np.full(m + 1, float(m)), x.astype(float))
        pmf = comb * (np.exp(kern) @ post)
        return list(pmf / pmf.sum())

    def mirror(self) -> GridPrior:
        return GridPrior(atoms=(1.0 - self.atoms)[::-1].copy(), weights=self.weights[::-1].copy())

    def moment(self, a: int, b: int = 0) -> float:
        """E[p^a (1 - p)^b] under the prior."""
        return float(self.weights @ (self.atoms**a * (1.0 - self.atoms) ** b))

    def beta_equivalent(self) -> tuple[float, float]:
        """(alpha, beta) of the Beta with this prior's mean and variance: the `prior`
        object's alpha and beta, kept for readers of the JSON written before the NPMLE."""
        m = min(max(self.mean, 1e-6), 1.0 - 1e-6)
        var = max(self.moment(2) - self.mean**2, 1e-12)
        # A point mass is the limit of ever stronger Betas; more spread than any Beta
        # (mass piled at 0 and 1) the limit of ever weaker ones.
        s = min(max(m * (1.0 - m) / var - 1.0, 1e-6), 1e12)
        return (m * s, (1.0 - m) * s)

    def summary(self) -> dict[str, Any]:
        alpha, beta = self.beta_equivalent()
        keep = self.weights >= SHOWN_MASS
        return {
            "alpha": alpha,
            "beta": beta,
            "kind": "npmle",
            "mean": self.mean,
            "mass_at_0": float(self.weights[self.atoms == 0.0].sum()),
            "mass_at_1": float(self.weights[self.atoms == 1.0].sum()),
            "support": [
                [float(p), float(w)]
                for p, w in zip(self.atoms[keep], self.weights[keep], strict=True)
            ],
        }


def _em_step(
    f: NDArray[np.float64], kernel: NDArray[np.float64], share: NDArray[np.float64]
) -> NDArray[np.float64]:
    """One EM update: f_j <- f_j * sum_i share_i K_ij / (K_i . f)."""
    out = f * (kernel.T @ (share / (kernel @ f)))
    return np.asarray(out / out.sum(), dtype=np.float64)


def _mean_loglik(
    f: NDArray[np.float64], kernel: NDArray[np.float64], share: NDArray[np.float64]
) -> float:
    with np.errstate(divide="ignore"):
        return float(share @ np.log(kernel @ f))


def _solve_em(kernel: NDArray[np.float64], share: NDArray[np.float64]) -> NDArray[np.float64]:
    """The NPMLE by EM (Jiang and Zhang 2009) from the uniform distribution, for
    histograms too long for the dual's Newton steps."""
    f = np.full(kernel.shape[1], 1.0 / kernel.shape[1])
    ll = _mean_loglik(f, kernel, share)
    for _ in range(MAX_ITERATIONS):
        f = _em_step(f, kernel, share)
        new_ll = _mean_loglik(f, kernel, share)
        if new_ll - ll < TOLERANCE:
            break
        ll = new_ll
    return f


def _solve_dual(kernel: NDArray[np.float64], share: NDArray[np.float64]) -> NDArray[np.float64]:
    """The NPMLE through its dual (Koenker and Mizera 2014): minimise
    -sum_i s_i log v_i subject to K^T v <= 1, one variable per histogram row, by a
    log-barrier Newton method. The barrier's multipliers mu / (1 - K^T v)_j are the
    primal weights f_j (their sum tends to 1); the fitted marginal is s_i / v_i."""
    s = share
    nu = 0.5 * s  # strictly feasible: every column of K is at most 1, and sum(s) = 1
    mu, columns = 1.0, kernel.shape[1]

    def barrier(v: NDArray[np.float64], mu: float) -> float:
        slack = 1.0 - kernel.T @ v
        if (v <= 0.0).any() or (slack <= 0.0).any():
            return math.inf
        return float(-s @ np.log(v) - mu * np.sum(np.log(slack)))

    best, best_ll = np.full(columns, 1.0 / columns), -math.inf
    while True:
        for _ in range(NEWTON_STEPS):
            slack = 1.0 - kernel.T @ nu
            grad = -s / nu + mu * (kernel @ (1.0 / slack))
            hess = np.diag(s / nu**2) + mu * (kernel / slack**2) @ kernel.T
            step = -np.linalg.solve(hess, grad)
            decrement = -float(grad @ step)
            if decrement < 1e-10:
                break
            t, start = 1.0, barrier(nu, mu)
            while barrier(nu + t * step, mu) > start - 0.25 * t * decrement and t > 1e-14:
                t *= 0.5
            nu = nu + t * step
        # The primal weights from this barrier level. 1 - K^T v loses digits as mu
        # shrinks (it is about mu / f_j on the support), so the best level by the
        # primal likelihood is kept rather than the last.
        weights = mu / (1.0 - kernel.T @ nu)
        if np.all(np.isfinite(weights)) and weights.sum() > 0.0:
            f = weights / weights.sum()
            ll = _mean_loglik(f, kernel, s)
            if ll > best_ll:
                best, best_ll = f, ll
        if mu * columns < GAP:
            break
        mu *= 0.1
    # A few EM steps (each raises the likelihood) settle what the barrier left.
    for _ in range(POLISH_STEPS):
        best = _em_step(best, kernel, s)
    return best


def fit_prior_counts(
    counts: Iterable[tuple[int, float, int]], grid: NDArray[np.float64] | None = None
) -> GridPrior:
    """The NPMLE of the pass-rate distribution from (n, c, samples) rows (rows with n = 0
    or no samples are left out): the dual's barrier method up to DUAL_ROWS distinct
    rows, EM beyond."""
    rows = sorted((int(n), float(c), int(w)) for n, c, w in counts if n > 0 and w > 0)
    atoms = default_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    if not rows:
        return GridPrior(atoms, np.full(atoms.size, 1.0 / atoms.size))
    n = np.array([r[0] for r in rows], dtype=np.float64)
    c = np.array([r[1] for r in rows], dtype=np.float64)
    w = np.array([r[2] for r in rows], dtype=np.float64)
    log_k = _log_kernel(atoms, n, c)
    kernel = np.exp(log_k - log_k.max(axis=1, keepdims=True))
    share = w / w.sum()
    f = _solve_dual(kernel, share) if len(rows) <= DUAL_ROWS else _solve_em(kernel, share)
    return GridPrior(atoms, f, Likelihood(n=n, c=c, counts=w, kernel=kernel))
