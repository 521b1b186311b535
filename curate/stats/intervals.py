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
(n, c) histogram (`level_cut`). That set holds the true distribution with
about 95% probability (a likelihood-ratio confidence set for the cell probabilities,
as in the "F-localization" of Ignatiadis and Wager 2022), so the interval of every
figure drawn from it holds that figure's truth at least as often. A profile interval
with one degree of freedom would be narrower, but in simulation it missed: the NPMLE
is a many-parameter fit, and the truth sits further from it than one degree of freedom
allows. For a figure the data pins down the set is narrow; for one it cannot pin down
it widens to the range the data allows. The likelihood is the one the NPMLE maximises,
so ragged n and adaptive stopping are handled the same way (`curate.stats.prior`).

Each bound is a convex problem (a linear objective over the simplex, within a convex
likelihood set); it is computed through its Lagrangian dual (`_bound`), whose every
value is a valid bound, so the interval is never narrower than the set allows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from curate.stats.mixed import ScoreModel
from curate.stats.prior import GridPrior, Likelihood

# The 95% interval: the normal quantile of 0.95 (for the Wilson-Hilferty approximation
# of chi-square quantiles) and chi-square(1)'s 95% quantile, exact.
LEVEL = 0.95
Z_95 = 1.6448536269514722
CHI2_1 = 3.841458820694124
# The dual bound's temperatures, from smooth to sharp: the last one loosens a bound by
# at most 1e-4 * log(grid points), about 5e-4.
TEMPERATURES = (1e-2, 1e-3, 1e-4)
NEWTON_STEPS = 40
# Histograms with more distinct (n, c) rows than this get no interval (None): a bound
# would take seconds. Fixed and capped runs stay far below it (N = 8: 9 rows; ragged
# 2-12: 88); a budget run without a cap can exceed it.
MAX_ROWS = 400
# Newton stops at this decrement: the bound is valid at every step, and this is far
# below the 0.1 points a share is printed to.
DECREMENT = 1e-8


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
    the chi-square quantile at one degree of freedom per free histogram cell. The cells
    count as one multinomial (cells - 1): right for an adaptive run, where a sample's n
    depends on its outcomes, and conservative for a fixed or ragged design (cells minus
    distinct n would do there)."""
    return chi2_quantile(max(1, int(data.counts.size) - 1)) / 2.0


def mixed_coefficients(atoms: NDArray[np.float64], group_size: int) -> NDArray[np.float64]:
    """u_G(p_j) = 1 - p_j^G - (1 - p_j)^G on the grid (0 for G <= 1)."""
    if group_size <= 1:
        return np.zeros_like(atoms)
    return np.asarray(1.0 - atoms**group_size - (1.0 - atoms) ** group_size)


def _bound(
    f_hat: NDArray[np.float64], data: Likelihood, coef: NDArray[np.float64], sign: float
) -> float:
    """max (sign = 1) or -max(-coef) (sign = -1) of coef^T f over the likelihood set, as
    an upper (lower) bound that is valid at every step of its minimisation.

    Lagrangian duality: for any lam > 0 and nu > 0 (one per histogram row),

        max {a^T f : f in the simplex, sum_i s_i log (K f)_i >= floor}
          <= max_j (a + K^T nu)_j + lam sum_i s_i log(lam s_i / nu_i) - lam (1 + floor),

    (relax the likelihood constraint with lam, the link g = K f with nu, and maximise
    over f and g apart). The right side is jointly convex in (lam, nu); the max over the
    grid is replaced by its log-sum-exp upper bound at temperature tau (tighter than
    tau log J), and it is minimised by damped Newton steps in log coordinates while tau
    shrinks. Every value on the way is a bound, so a hard case only makes the interval
    wider, never narrower than the data allows."""
    a = sign * coef
    kernel = data.kernel
    share = data.counts / data.counts.sum()
    rows = kernel.shape[0]
    slack = level_cut(data) / float(data.counts.sum())  # in mean log-likelihood per sample
    floor = float(share @ np.log(kernel @ f_hat)) - slack
    lam = 1.0
    x = np.concatenate([[0.0], np.log(lam * share / (kernel @ f_hat))])

    def parts(x: NDArray[np.float64], tau: float, hessian: bool) -> tuple[float, Any, Any]:
        if float(np.max(np.abs(x))) > 600.0:  # exp would overflow or reach 0: not a point
            return math.inf, None, None
        lam, nu = math.exp(x[0]), np.exp(x[1:])
        z = (a + kernel.T @ nu) / tau
        top = float(z.max())
        e = np.exp(z - top)
        total = float(e.sum())
        value = tau * (top + math.log(total))
        value += lam * float(share @ np.log(lam * share / nu)) - lam * (1.0 + floor)
        if not hessian:
            return value, None, None
        pi = e / total
        k_pi = kernel @ pi
        jac = np.concatenate([[lam], nu])
        grad = np.concatenate(
            [[float(share @ np.log(share * lam / nu)) - floor], k_pi - lam * share / nu]
        )
        hess = np.empty((rows + 1, rows + 1))
        hess[0, 0] = 1.0 / lam
        hess[0, 1:] = hess[1:, 0] = -share / nu
        hess[1:, 1:] = ((kernel * pi) @ kernel.T - np.outer(k_pi, k_pi)) / tau + np.diag(
            lam * share / nu**2
        )
        grad = grad * jac
        hess = hess * np.outer(jac, jac) + np.diag(grad)
        return value, grad, hess

    best = math.inf
    eye = np.eye(rows + 1)
    for tau in TEMPERATURES:
        for _ in range(NEWTON_STEPS):
            value, grad, hess = parts(x, tau, True)
            best = min(best, value)
            # In log coordinates the Hessian may be indefinite: shift it until it is not.
            shift = 0.0
            while True:
                try:
                    np.linalg.cholesky(hess + shift * eye)
                    break
                except np.linalg.LinAlgError:
                    shift = shift * 10.0 if shift else 1e-8 * (1.0 + float(np.abs(hess).max()))
            step = -np.linalg.solve(hess + shift * eye, grad)
            decrement = -float(grad @ step)
            if decrement < DECREMENT:
                break
            t = 1.0
            while t > 1e-12 and parts(x + t * step, tau, False)[0] > value - 0.25 * t * decrement:
                t *= 0.5
            x = x + t * step
        best = min(best, parts(x, tau, False)[0])
    return sign * best


def linear_interval(prior: GridPrior, coef: NDArray[np.float64]) -> Interval:
    """The 95% interval of coef^T f over the likelihood set (module docstring); a prior with
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
    return (
        isinstance(prior, GridPrior)
        and prior.likelihood is not None
        and prior.likelihood.counts.size <= MAX_ROWS
    )


def can_bound(model: ScoreModel) -> bool:
    """Whether every prior behind `model` carries the likelihood it was fitted to, on a
    histogram short enough to bound (a dual Newton step solves a rows x rows system)."""
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
