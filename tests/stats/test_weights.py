"""Objective weights w(p) = f'(p): formulas, clipping, normalisation to mean 1."""

from __future__ import annotations

import math

import polars as pl
import pytest

from curate.errors import UsageError
from curate.stats.weights import (
    OBJECTIVES,
    add_weights,
    objective_weight,
    objective_weights,
)


def test_formulas_are_the_derivatives_of_f() -> None:
    f = {
        "linear": lambda p: p,
        "log": math.log,
        "sqrt": math.sqrt,
        "arcsin": lambda p: 2 * math.asin(math.sqrt(p)),
    }
    h = 1e-6
    for name, fn in f.items():
        for p in (0.07, 0.3, 0.5, 0.81):
            numeric = (fn(p + h) - fn(p - h)) / (2 * h)
            assert objective_weight(p, name) == pytest.approx(numeric, rel=1e-5), (name, p)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_weights_have_mean_one(objective: str) -> None:
    rates = [0.02, 0.1, 0.25, 0.5, 0.9, 0.99]
    w = objective_weights(rates, objective)
    assert sum(w) / len(w) == pytest.approx(1.0)  # type: ignore[arg-type]


def test_linear_is_flat_and_log_favours_hard_samples() -> None:
    assert objective_weights([0.1, 0.5, 0.9], "linear") == [1.0, 1.0, 1.0]
    w = objective_weights([0.1, 0.5, 0.9], "log")
    assert w[0] > w[1] > w[2]  # type: ignore[operator]
    arc = objective_weights([0.1, 0.5, 0.9], "arcsin")
    assert arc[0] == pytest.approx(arc[2]) and arc[1] < arc[0]  # type: ignore[operator]


def test_rates_are_clipped_to_delta() -> None:
    w = objective_weights([0.0, 0.001, 0.05, 0.5], "log", delta=0.05)
    assert w[0] == w[1] == w[2]  # all clipped to 0.05
    assert w[0] / w[3] == pytest.approx(0.5 / 0.05)  # type: ignore[operator]
    top = objective_weights([1.0, 0.95, 0.5], "arcsin", delta=0.05)
    assert top[0] == pytest.approx(top[1])


def test_missing_rates_stay_missing() -> None:
    w = objective_weights([None, 0.2, 0.4], "sqrt")
    assert w[0] is None and (w[1] + w[2]) / 2 == pytest.approx(1.0)  # type: ignore[operator]
    assert objective_weights([None], "log") == [None]


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_frame_version_matches_the_list_version(objective: str) -> None:
    rates = [0.01, 0.2, None, 0.6, 0.97]
    frame = pl.DataFrame({"sample_id": list("abcde"), "smoothed_pass_rate": rates})
    got = add_weights(frame, objective, 0.05)["weight"].to_list()
    want = objective_weights(rates, objective, 0.05)
    for g, w in zip(got, want, strict=True):
        assert (g is None and w is None) or g == pytest.approx(w)
    assert add_weights(frame, objective)["weight"].mean() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("objective", "delta", "needle"),
    [("cubic", 0.05, "unknown objective"), ("log", 0.0, "--weight-delta"), ("log", 0.5, "delta")],
)
def test_bad_arguments(objective: str, delta: float, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        objective_weights([0.5], objective, delta)
