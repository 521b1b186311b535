"""Intervals for the figures past the rollouts taken: what the data cannot say.

With N rollouts per sample, two populations can give almost the same counts and still
open very different shares of groups at G > N: a sample never solved in 8 tries could
have a pass rate of exactly 0 (never opens) or of 0.01 (opens one group of 64 in two).
A bootstrap of the fit would only show how the best fit moves between resamples; the
interval here also holds every population the data cannot rule out.

For a figure that is linear in the prior, a^T f (the population share of mixed groups
at G: a_j = 1 - p_j^G - (1 - p_j)^G; a difference of two such shares for the
multiplier), the interval is the smallest and largest value of a^T f over every prior f
on the grid that the data does not reject: whose log-likelihood is within half the 95%
chi-square quantile of the NPMLE's, with one degree of freedom per free cell of the
(n, c) histogram (cells minus distinct n). That set holds the true distribution with
about 95% probability (a likelihood-ratio confidence set for the cell probabilities,
as in the "F-localization" of Ignatiadis and Wager 2022), so the interval of every
figure drawn from it holds that figure's truth at least as often. A profile interval
with one degree of freedom would be narrower, but in simulation it missed: the NPMLE
is a many-parameter fit, and the truth sits further from it than one degree of freedom
allows. For a figure the data pins down the set is narrow; for one it cannot pin down
it widens to the range the data allows. The likelihood is the one the NPMLE maximises,
so ragged n and adaptive stopping are handled the same way (`curate.stats.prior`).

Each bound is a convex problem (a linear objective over the simplex, within a convex
likelihood set), solved by a primal log-barrier Newton method on the grid's weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from curate.stats.mixed import ScoreModel
from curate.stats.prior import GridPrior, Likelihood

# The 95% interval: the normal quantile of 0.95 (for the Wilson-Hilferty approximation
# of chi-square quantiles) and chi-square(1)'s 95% quantile, exact.
LEVEL = 0.95
Z_95 = 1.6448536269514722
CHI2_1 = 3.841458820694124
# The barrier method stops when its duality gap is below this (in units of the figure,
# a share in [0, 1]).
BOUND_GAP = 1e-3
NEWTON_STEPS = 100
# Centering stops at this Newton decrement: the path need only be followed roughly.
CENTERING = 1e-6


@dataclass(frozen=True)
class Interval:
    """A figure's 95% interval."""

    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def to_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


def chi2_quantile(df: int) -> float:
    """The 95% quantile of chi-square with `df` degrees of freedom (Wilson and
    Hilferty's cube-root approximation; exact for df = 1)."""
    if df <= 1:
        return CHI2_1
    h = 2.0 / (9.0 * df)
    return float(df * (1.0 - h + Z_95 * math.sqrt(h)) ** 3)


def level_cut(data: Likelihood) -> float:
    """How far below the NPMLE's the log-likelihood of a prior in the set may be: half
    the chi-square quantile at one degree of freedom per free histogram cell."""
    cells = int(data.counts.size)
    groups = len(set(data.n.tolist()))
    return chi2_quantile(max(1, cells - groups)) / 2.0


def mixed_coefficients(atoms: NDArray[np.float64], group_size: int) -> NDArray[np.float64]:
    """u_G(p_j) = 1 - p_j^G - (1 - p_j)^G on the grid (0 for G <= 1)."""
    if group_size <= 1:
        return np.zeros_like(atoms)
    return np.asarray(1.0 - atoms**group_size - (1.0 - atoms) ** group_size)


def _bound(
    f_hat: NDArray[np.float64], data: Likelihood, coef: NDArray[np.float64], sign: float
) -> float:
    """max (sign = 1) or min (sign = -1) of coef^T f over the likelihood set."""
    kernel = data.kernel
    share = data.counts / data.counts.sum()
    columns = kernel.shape[1]
    slack = level_cut(data) / float(data.counts.sum())  # in mean log-likelihood per sample

    def ell(f: NDArray[np.float64]) -> float:
        return float(share @ np.log(kernel @ f))

    floor = ell(f_hat) - slack
    # A strictly interior start: the NPMLE with a sliver of the uniform distribution,
    # small enough to stay inside the likelihood set.
    f = (1.0 - 1e-3 * slack) * f_hat + 1e-3 * slack / columns

    def barrier(g: NDArray[np.float64], t: float) -> float:
        if (g <= 0.0).any():
            return math.inf
        room = ell(g) - floor
        if room <= 0.0:
            return math.inf
        return float(-t * sign * (coef @ g) - math.log(room) - np.sum(np.log(g)))

    t = float(columns + 1)  # where the duality gap is about 1: coarser is wasted
    ones = np.ones(columns)
    while True:
        for _ in range(NEWTON_STEPS):
            kf = kernel @ f
            room = float(share @ np.log(kf)) - floor
            grad_l = kernel.T @ (share / kf)
            grad = -t * sign * coef - grad_l / room - 1.0 / f
            # The Hessian is diag(1/f^2) plus a term of rank rows + 1:
            # K^T diag(s / (K f)^2) K / room + grad_l grad_l^T / room^2.
            low_rank = np.column_stack(
                [kernel.T * (np.sqrt(share) / kf) / math.sqrt(room), grad_l / room]
            )
            step = _newton_step(f * f, low_rank, grad, ones)
            decrement = -float(grad @ step)
            if decrement < CENTERING:
                break
            # The longest step that keeps every weight positive, then backtracking.
            shrinking = step < 0.0
            s = min(1.0, 0.99 * float(np.min(-f[shrinking] / step[shrinking], initial=np.inf)))
            start = barrier(f, t)
            while barrier(f + s * step, t) > start - 0.25 * s * decrement and s > 1e-14:
                s *= 0.5
            f = f + s * step
        if (columns + 1) / t < BOUND_GAP:
            break
        t *= 50.0
    return float(coef @ f)


def _newton_step(
    diag_inv: NDArray[np.float64],
    low_rank: NDArray[np.float64],
    grad: NDArray[np.float64],
    ones: NDArray[np.float64],
) -> NDArray[np.float64]:
    """The Newton step on the simplex (H d + 1 nu = -grad, 1^T d = 0) for
    H = diag(1 / diag_inv) + U U^T, by the Woodbury identity when U has fewer columns
    than rows (a few histogram rows against the grid), else by a dense solve."""
    rows, rank = low_rank.shape
    if rank < rows:
        scaled = low_rank * diag_inv[:, None]
        core = np.eye(rank) + low_rank.T @ scaled

        def solve(v: NDArray[np.float64]) -> NDArray[np.float64]:
            dv = diag_inv * v
            return np.asarray(dv - scaled @ np.linalg.solve(core, low_rank.T @ dv))
    else:
        hess = np.diag(1.0 / diag_inv) + low_rank @ low_rank.T

        def solve(v: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.asarray(np.linalg.solve(hess, v))

    h_g, h_1 = solve(grad), solve(ones)
    return np.asarray(-(h_g - h_1 * (ones @ h_g) / (ones @ h_1)))


def linear_interval(prior: GridPrior, coef: NDArray[np.float64]) -> Interval:
    """The 95% profile-likelihood interval of coef^T f (module docstring); a prior with
    no data behind it allows anything between the smallest and largest coefficient."""
    return Interval(linear_bound(prior, coef, -1.0), linear_bound(prior, coef, 1.0))


def linear_bound(prior: GridPrior, coef: NDArray[np.float64], sign: float) -> float:
    """The lower (sign = -1) or upper (sign = 1) end of `linear_interval`."""
    point = float(coef @ prior.weights)
    data = prior.likelihood
    if data is None or data.counts.size == 0:
        return float(coef.max() if sign > 0 else coef.min())
    # The NPMLE is inside the set, so each bound is at least as far out as the point
    # estimate; rounding in the solver must not put it on the wrong side.
    value = _bound(prior.weights, data, coef, sign)
    return max(value, point) if sign > 0 else min(value, point)


def _has_likelihood(prior: object) -> bool:
    return isinstance(prior, GridPrior) and prior.likelihood is not None


def can_bound(model: ScoreModel) -> bool:
    """Whether every prior behind `model` carries the likelihood it was fitted to."""
    if model.is_binary:
        return _has_likelihood(model.priors[1])
    rare = [] if model.rare is None else [model.rare]
    return all(_has_likelihood(p) for p in (*model.priors, *rare))


def gain_interval(model: ScoreModel, small: int, large: int) -> Interval:
    """95% interval of how many more groups are mixed at `large` than at `small`
    (`small` = 1: the mixed share at `large` itself).

    0/1 scores: one linear functional of the pass-rate prior, u_large - u_small.
    Partial credit: the share is 1 - sum_v E[r_v^G] over per-value priors fitted apart,
    so the gain is sum_v E[r_v^small - r_v^large]; its interval adds up each value's
    (a conservative combination: every value at its own extreme at once)."""
    return Interval(gain_bound(model, small, large, -1.0), gain_bound(model, small, large, 1.0))


def gain_bound(model: ScoreModel, small: int, large: int, sign: float) -> float:
    """The lower (sign = -1) or upper (sign = 1) end of `gain_interval`."""
    if model.is_binary:
        prior = model.priors[1]
        assert isinstance(prior, GridPrior)
        atoms = prior.atoms
        coef = mixed_coefficients(atoms, large) - mixed_coefficients(atoms, small)
        return linear_bound(prior, coef, sign)
    parts = [(p, 1) for p in model.priors]
    if model.rare is not None:
        parts.append((model.rare, model.rare_values))
    total = 0.0
    for prior, copies in parts:
        assert isinstance(prior, GridPrior)
        total += copies * linear_bound(prior, prior.atoms**small - prior.atoms**large, sign)
    return min(1.0, max(-1.0, total))


def mixed_interval(model: ScoreModel, group_size: int) -> Interval:
    """95% interval of the population share of mixed groups at `group_size`."""
    if group_size <= 1:
        return Interval(0.0, 0.0)
    share = gain_interval(model, 1, group_size)
    return Interval(max(0.0, share.low), min(1.0, share.high))


def multiplier_range(
    low_gain: Callable[[int], float],
    high_gain: Callable[[int], float],
    max_multiplier: int,
    min_gain: float,
) -> tuple[int, int]:
    """(lowest, highest) multiplier the data allows under the rule "the smallest m at
    which going from G*m to G*(m+1) adds fewer than `min_gain`": `low_gain(m)` and
    `high_gain(m)` bound that step's gain (95%). The lowest is the first m whose gain
    could be below `min_gain`, the highest the first whose gain surely is (or
    `max_multiplier`). Each bound is asked for only as far as it is needed."""
    low = next((m for m in range(1, max_multiplier + 1) if low_gain(m) < min_gain), None)
    high = next((m for m in range(1, max_multiplier + 1) if high_gain(m) < min_gain), None)
    return (low or max_multiplier, high or max_multiplier)
