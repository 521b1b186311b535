"""Synthetic `per_sample` and `gate_curve` frames shaped like the output of `curate.stats`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

Z = 1.959963984540054  # two-sided 95% normal quantile, for the Wilson interval


def make_per_sample(
    n: int,
    *,
    seed: int = 0,
    n_rollouts: int = 8,
    threshold: float = 0.01,
    unscored: int = 0,
    continuous_share: float = 0.05,
) -> pl.DataFrame:
    """`n` scored samples (+ `unscored` with only errors), columns consistent with each other.

    Pass rates are Beta(0.4, 0.4) distributed (lots of always-right/always-wrong, as in real
    data) and successes binomial with `n_rollouts` trials; a `continuous_share` of samples get
    continuous scores with small spread so the low-variance category is populated too.
    """
    rng = np.random.default_rng(seed)
    p = rng.beta(0.4, 0.4, size=n)
    errors = rng.binomial(1, 0.05, size=n) * rng.integers(1, 3, size=n)
    scored = n_rollouts - errors
    successes = rng.binomial(scored, p)
    mean = successes / scored
    variance = mean * (1 - mean)  # population variance of 0/1 scores
    best = (successes > 0).astype(np.float64)
    worst = (successes == scored).astype(np.float64)

    cont = rng.random(n) < continuous_share
    c_mean = rng.uniform(0.1, 0.9, size=n)
    c_var = rng.uniform(0.0, 0.02, size=n)
    mean = np.where(cont, c_mean, mean)
    variance = np.where(cont, c_var, variance)
    best = np.where(cont, np.minimum(1.0, c_mean + 2 * np.sqrt(c_var)), best)
    worst = np.where(cont, np.maximum(0.0, c_mean - 2 * np.sqrt(c_var)), worst)

    pass_rate = successes / scored
    centre = (pass_rate + Z**2 / (2 * scored)) / (1 + Z**2 / scored)
    half = (Z / (1 + Z**2 / scored)) * np.sqrt(
        pass_rate * (1 - pass_rate) / scored + Z**2 / (4 * scored**2)
    )
    smoothed = (successes + 1) / (scored + 2)
    gate = 1 - smoothed**n_rollouts - (1 - smoothed) ** n_rollouts

    category = np.where(
        (best >= 1) & (variance <= 0),
        "always_correct",
        np.where(
            best <= 0,
            "always_incorrect",
            np.where(
                (variance > threshold) & (mean > 0) & (mean < 1), "high_variance", "low_variance"
            ),
        ),
    )
    frame = pl.DataFrame(
        {
            "sample_id": [f"s{i:06d}" for i in range(n)],
            "n_rollouts": np.full(n, n_rollouts, dtype=np.int64),
            "n_errors": errors.astype(np.int64),
            "successes": successes.astype(np.int64),
            "mean_score": mean,
            "variance": variance,
            "variance_unbiased": variance * scored / np.maximum(scored - 1, 1),
            "std_dev": np.sqrt(variance),
            "best_score": best,
            "worst_score": worst,
            "pass_rate": pass_rate,
            "wilson_low": centre - half,
            "wilson_high": centre + half,
            "smoothed_pass_rate": smoothed,
            "gate_open_probability": gate,
            "category": category,
        }
    )
    if unscored:
        floats = [c for c, t in frame.schema.items() if t == pl.Float64]
        empty = pl.DataFrame(
            {
                "sample_id": [f"e{i:06d}" for i in range(unscored)],
                "n_rollouts": [n_rollouts] * unscored,
                "n_errors": [n_rollouts] * unscored,
                "successes": [0] * unscored,
                **{c: pl.Series(c, [None] * unscored, dtype=pl.Float64) for c in floats},
                "category": ["always_incorrect"] * unscored,
            },
            schema=frame.schema,
        )
        frame = pl.concat([frame, empty])
    return frame


def make_gate_curve(per_sample: pl.DataFrame, max_group: int = 64) -> pl.DataFrame:
    """Expected share of samples whose group of size G has mixed outcomes, G = 1..max_group."""
    p = per_sample["smoothed_pass_rate"].drop_nulls().to_numpy()
    sizes = np.arange(1, max_group + 1)
    fractions = [float(np.mean(1 - p**g - (1 - p) ** g)) for g in sizes]
    return pl.DataFrame(
        {"group_size": sizes.astype(np.int64), "expected_open_fraction": fractions},
        schema={"group_size": pl.Int64, "expected_open_fraction": pl.Float64},
    )


@pytest.fixture(scope="session")
def small_frame() -> pl.DataFrame:
    """10 scored samples plus one that only errored."""
    return make_per_sample(10, seed=1, unscored=1)


@pytest.fixture(scope="session")
def large_frame() -> pl.DataFrame:
    """100,000 scored samples plus a few that only errored."""
    return make_per_sample(100_000, seed=2, unscored=5)


@pytest.fixture(scope="session")
def frame_factory() -> Callable[..., pl.DataFrame]:
    """`make_per_sample`, for tests that need their own sizes."""
    return make_per_sample


@pytest.fixture(scope="session")
def gate_factory() -> Callable[..., pl.DataFrame]:
    """`make_gate_curve`, for tests that need a gate curve."""
    return make_gate_curve
