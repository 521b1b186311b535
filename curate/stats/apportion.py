"""Integer counts proportional to weights, within per-item bounds, summing exactly to a total.

Two steps: the continuous allocation x_i = clip(lambda * w_i, lo_i, hi_i) with
sum x = total (water-filling: fix the items that cross a bound, rescale the rest,
repeat), then largest-remainder rounding, which never leaves the bounds because
lo_i <= floor(x_i) and ceil(x_i) <= hi_i for integer bounds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def apportion(
    weights: Sequence[float] | np.ndarray,
    total: int,
    lower: int | Sequence[int] | np.ndarray = 0,
    upper: int | Sequence[int] | np.ndarray | None = None,
) -> np.ndarray:
    """Integer counts n_i in [lower_i, upper_i], sum n_i == total, n_i ~ weights_i.

    `upper=None` means no upper bound. Raises ValueError when the bounds cannot hold
    `total` or a weight is negative or not finite. Items whose weight is 0 get their
    lower bound unless the total cannot be placed otherwise (then, as with all-zero
    weights, the rest is spread evenly).
    """
    w = np.asarray(weights, dtype=float)
    size = w.size
    lo = np.broadcast_to(np.asarray(lower, dtype=np.int64), (size,)).copy()
    if upper is None:
        hi = np.full(size, max(total, 0) + int(lo.max(initial=0)), dtype=np.int64)
    else:
        hi = np.broadcast_to(np.asarray(upper, dtype=np.int64), (size,)).copy()
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and non-negative")
    if np.any(lo < 0) or np.any(lo > hi):
        raise ValueError("bounds must satisfy 0 <= lower <= upper")
    if size == 0:
        if total != 0:
            raise ValueError(f"no items to place a total of {total} on")
        return np.zeros(0, dtype=np.int64)
    if total < lo.sum() or total > hi.sum():
        raise ValueError(f"total {total} is outside what the bounds allow [{lo.sum()}, {hi.sum()}]")
    x = _water_fill(w, float(total), lo.astype(float), hi.astype(float))
    return _round(x, w, total, lo, hi)


def _water_fill(w: np.ndarray, total: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Continuous x = clip(lambda * w, lo, hi) with sum x == total.

    Each pass scales the free items to the mass left and fixes the side that
    overshoots more: if the items below their lower bound lack more than the items
    above their upper bound have in excess, the true lambda is at most this one, so
    those low items are at their bound in the solution too (and symmetrically).
    Every pass fixes at least one item, so it ends within len(w) passes.
    """
    x = np.empty_like(w)
    free = np.ones(w.size, dtype=bool)
    fixed_mass = 0.0
    while True:
        idx = np.flatnonzero(free)
        if idx.size == 0:
            return x
        mass = total - fixed_mass
        wf = w[idx]
        if wf.sum() <= 0:
            wf = np.ones_like(wf)  # nothing to go by: spread evenly
        trial = mass * wf / wf.sum()
        below = trial < lo[idx]
        above = trial > hi[idx]
        if not below.any() and not above.any():
            x[idx] = trial
            return x
        lack = float((lo[idx] - trial)[below].sum())
        excess = float((trial - hi[idx])[above].sum())
        pick, bound = (below, lo) if lack >= excess else (above, hi)
        chosen = idx[pick]
        x[chosen] = bound[chosen]
        fixed_mass += float(bound[chosen].sum())
        free[chosen] = False


def _round(x: np.ndarray, w: np.ndarray, total: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Largest-remainder rounding of x to integers in [lo, hi] summing to `total`."""
    n = np.clip(np.floor(x + 1e-9).astype(np.int64), lo, hi)
    frac = x - n
    # Ties go to the larger weight, then to the earlier item: deterministic.
    order_up = np.lexsort((np.arange(x.size), -w, -frac))
    order_down = np.lexsort((np.arange(x.size), w, frac))
    deficit = total - int(n.sum())
    while deficit != 0:  # one pass almost always; float edge cases may need another
        if deficit > 0:
            room = order_up[n[order_up] < hi[order_up]][:deficit]
            n[room] += 1
            deficit -= room.size
        else:
            room = order_down[n[order_down] > lo[order_down]][:-deficit]
            n[room] -= 1
            deficit += room.size
        if room.size == 0:  # cannot happen when lo.sum() <= total <= hi.sum()
            raise ValueError("rounding could not meet the total within the bounds")
    return n
