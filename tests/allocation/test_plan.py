"""Rollout plans: methods, zero-signal handling, exact budgets, the variance proxy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from curate.allocation import (
    DEFAULT_ZERO_SIGNAL,
    allocate,
    allocation_weights,
    join_plan,
    variance_proxy,
)
from curate.errors import InputError, UsageError
from curate.stats import sample_stats
from tests.conftest import long_frame


def _per_sample(scores: dict[str, list[float]]) -> pl.DataFrame:
    return sample_stats(long_frame(scores))


SCORES = {
    "easy": [1, 1, 1, 0, 1, 1, 1, 1],
    "half": [1, 0, 1, 0, 1, 0, 1, 0],
    "hard": [0, 0, 0, 1, 0, 0, 0, 0],
    "never": [0] * 8,
    "always": [1] * 8,
}


def test_weights_by_method() -> None:
    p = np.array([0.1, 0.5, 0.9])
    assert allocation_weights(p, "neyman") == pytest.approx(np.sqrt(p * (1 - p)))
    assert allocation_weights(p, "inverse-p") == pytest.approx(1 / p)
    assert allocation_weights(p, "uniform").tolist() == [1, 1, 1]
    with pytest.raises(UsageError, match="unknown method"):
        allocation_weights(p, "best")


@pytest.mark.parametrize("method", ["neyman", "inverse-p", "uniform"])
@pytest.mark.parametrize("budget", [10, 37, 100, 1001])
def test_plan_sums_to_budget_within_bounds(method: str, budget: int) -> None:
    plan = allocate(
        _per_sample(SCORES), budget, method=method, min_runs=2, max_runs=None, zero_signal="min"
    )
    assert plan["planned_rollouts"].sum() == budget
    assert plan["planned_rollouts"].min() >= 2
    zero = plan.filter(pl.col("zero_signal"))
    assert sorted(zero["sample_id"]) == ["always", "never"]
    assert zero["planned_rollouts"].to_list() == [2, 2]
    assert plan["sample_id"].to_list() == sorted(SCORES)


def test_neyman_favours_the_uncertain_and_inverse_p_the_hard() -> None:
    ps = _per_sample(SCORES)
    ney = dict(allocate(ps, 200, method="neyman").select("sample_id", "planned_rollouts").rows())
    assert ney["half"] > ney["easy"] and ney["half"] > ney["hard"]
    inv = dict(allocate(ps, 200, method="inverse-p").select("sample_id", "planned_rollouts").rows())
    assert inv["hard"] > inv["half"] > inv["easy"]


def test_max_runs_caps_and_drop_zero_signal_removes() -> None:
    ps = _per_sample(SCORES)
    plan = allocate(ps, 60, method="inverse-p", min_runs=1, max_runs=25, zero_signal="drop")
    assert sorted(plan["sample_id"]) == ["easy", "half", "hard"]
    assert plan["planned_rollouts"].max() <= 25 and plan["planned_rollouts"].sum() == 60


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"budget": 9}, "below the minimum: 5 samples x --min-rollouts 2 = 10"),
        ({"budget": 0}, "--budget must be at least 1"),
        ({"budget": 100, "max_runs": 10}, "above what the bounds can hold"),
        (
            {"budget": 50, "min_runs": 4, "max_runs": 3},
            "--max-rollouts 3 is below --min-rollouts 4",
        ),
        ({"budget": 50, "method": "best"}, "unknown method"),
        ({"budget": 50, "zero_signal": "keep"}, "unknown zero-signal rule"),
    ],
)
def test_plan_errors(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        allocate(_per_sample(SCORES), **kwargs)  # type: ignore[arg-type]


def test_rate_is_the_default_zero_signal_rule() -> None:
    """The default serves the variance proxy: `min` is worse than uniform on it
    (benchmarks/bench_allocate.py), so `rate` is what a bare call does."""
    ps = _per_sample(SCORES)
    assert DEFAULT_ZERO_SIGNAL == "rate"
    assert allocate(ps, 200).equals(allocate(ps, 200, zero_signal="rate"))
    sigma2 = ps.sort("sample_id")["smoothed_pass_rate"].to_numpy()
    sigma2 = sigma2 * (1 - sigma2)
    uniform = variance_proxy(sigma2, np.full(sigma2.size, 40))
    by_rule = {
        rule: variance_proxy(sigma2, allocate(ps, 200, zero_signal=rule)["planned_rollouts"])
        for rule in ("min", "rate")
    }
    assert by_rule["rate"] <= uniform < by_rule["min"]


def test_zero_signal_by_rate_allocates_them_like_the_rest() -> None:
    plan = allocate(_per_sample(SCORES), 200, method="neyman", zero_signal="rate")
    counts = dict(plan.select("sample_id", "planned_rollouts").rows())
    assert sum(counts.values()) == 200
    assert counts["never"] > 2 and counts["always"] > 2  # not pinned to the minimum
    assert counts["half"] > counts["never"]  # a closed gate still counts for less


def test_no_signal_left_is_an_error() -> None:
    with pytest.raises(UsageError, match="no sample with learning signal"):
        allocate(_per_sample({"a": [0, 0], "b": [1, 1]}), 10, zero_signal="drop")


def test_neyman_minimises_the_variance_proxy() -> None:
    rng = np.random.default_rng(5)
    p = rng.beta(0.5, 3.0, 500)
    sigma2 = p * (1 - p)
    budget = 8 * p.size
    frame = pl.DataFrame(
        {
            "sample_id": [f"s{i:04d}" for i in range(p.size)],
            "n_rollouts": [8] * p.size,
            "successes": [1] * p.size,
            "pass_rate": p,
            "smoothed_pass_rate": p,
            "variance": sigma2,
            "category": ["high_variance"] * p.size,
        }
    )
    ney = allocate(frame, budget, method="neyman", min_runs=1)["planned_rollouts"].to_numpy()
    uni = allocate(frame, budget, method="uniform", min_runs=1)["planned_rollouts"].to_numpy()
    assert (uni == 8).all()
    assert variance_proxy(sigma2, ney) < variance_proxy(sigma2, uni)
    assert variance_proxy([0.25, 0.0], [0, 3]) == float("inf")
    assert variance_proxy([0.25, 0.0], [4, 0]) == pytest.approx(0.0625)


def test_join_plan_adds_planned_rollouts() -> None:
    frame = pl.DataFrame({"sample_id": ["a", "b", "c"], "x": [1, 2, 3]})
    plan = pl.DataFrame({"sample_id": ["c", "a"], "planned_rollouts": [5, 7]})
    got = join_plan(frame, plan)
    assert got["planned_rollouts"].to_list() == [7, None, 5] and got["x"].to_list() == [1, 2, 3]
    with pytest.raises(InputError, match="missing column"):
        join_plan(frame, pl.DataFrame({"sample_id": ["a"]}), source="plan.csv")
    with pytest.raises(InputError, match="more than once"):
        join_plan(frame, pl.DataFrame({"sample_id": ["a", "a"], "planned_rollouts": [1, 2]}))
