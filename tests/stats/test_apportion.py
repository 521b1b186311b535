"""Integer apportionment: exact totals, bounds, proportionality, largest remainder."""

from __future__ import annotations

import numpy as np
import pytest

from curate.stats.apportion import apportion


def _continuous(w: np.ndarray, total: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """clip(lambda w, lo, hi) summing to total, by bisection on lambda (the reference)."""
    if w.sum() == 0:
        w = np.ones_like(w)
    a, b = 0.0, 1.0
    while np.clip(b * w, lo, hi).sum() < total:
        b *= 2
    for _ in range(200):
        mid = (a + b) / 2
        if np.clip(mid * w, lo, hi).sum() < total:
            a = mid
        else:
            b = mid
    return np.clip(b * w, lo, hi)


def test_proportional_when_no_bound_binds() -> None:
    assert apportion([1, 2, 3], 60).tolist() == [10, 20, 30]


def test_largest_remainder_and_ties() -> None:
    assert apportion([1, 1, 1], 10).tolist() == [4, 3, 3]  # tie: earliest item
    assert apportion([1, 1, 2], 9).tolist() == [2, 2, 5]  # 2.25, 2.25, 4.5 -> the .5 wins


def test_bounds_are_clipped_and_the_rest_rescaled() -> None:
    # 100:1:1 would give nearly everything to the first; the cap sends the rest on.
    assert apportion([100, 1, 1], 30, lower=0, upper=12).tolist() == [12, 9, 9]
    assert apportion([1, 0, 0], 10, lower=2).tolist() == [6, 2, 2]


def test_all_zero_weights_spread_evenly() -> None:
    assert apportion([0, 0, 0, 0], 10).tolist() == [3, 3, 2, 2]


@pytest.mark.parametrize(
    ("weights", "total", "lower", "upper"),
    [
        ([1, 1], 1, 1, None),
        ([1, 1], 7, 0, 3),
        ([-1, 1], 2, 0, None),
        ([1.0, float("nan")], 2, 0, None),
    ],
)
def test_infeasible_or_bad_input_raises(weights, total, lower, upper) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        apportion(weights, total, lower, upper)


def test_random_cases_sum_exactly_within_bounds() -> None:
    rng = np.random.default_rng(7)
    for _ in range(400):
        size = int(rng.integers(1, 60))
        w = rng.gamma(0.5, 1.0, size) * (rng.random(size) > 0.15)
        lo = rng.integers(0, 4, size)
        hi = lo + rng.integers(0, 30, size)
        total = int(rng.integers(lo.sum(), hi.sum() + 1))
        n = apportion(w, total, lo, hi)
        assert int(n.sum()) == total
        assert np.all(n >= lo) and np.all(n <= hi)
        if total > np.where(w > 0, hi, lo).sum():
            continue  # zero-weight items must absorb the rest: no finite lambda to compare
        # Rounding moves each count by less than one from the continuous optimum.
        x = _continuous(w, total, lo.astype(float), hi.astype(float))
        assert np.all(np.abs(n - x) < 1 + 1e-6), (w, total, lo, hi, n, x)


def test_large_input_is_fast_and_exact() -> None:
    rng = np.random.default_rng(0)
    w = rng.random(200_000)
    n = apportion(w, 1_600_000, lower=2, upper=40)
    assert int(n.sum()) == 1_600_000 and n.min() >= 2 and n.max() <= 40
