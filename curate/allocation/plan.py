"""A rollout plan for training: how many rollouts each sample gets out of a budget B.

    neyman     n_i ~ sqrt(p~_i (1 - p~_i))  minimises sum_i sigma_i^2 / n_i at sum n_i = B
                                            (DynaMO's variance-minimising allocation, with
                                            the Bernoulli variance as sigma^2)
    inverse-p  n_i ~ 1 / p~_i               the log objective's implicit weight
                                            (Reinforce-Ada's non-linear objectives)
    uniform    n_i ~ 1

p~ is the smoothed pass rate (the posterior mean under the pass-rate prior,
`curate.stats.prior`), so a sample seen 0/8 still gets a finite, non-zero
rate. Samples with zero signal (every observed outcome the same: the gate stayed
closed) are allocated like the rest on their smoothed rate ("rate", the default), get
the minimum ("min"), or leave the plan ("drop"). Only "rate" minimises the variance
proxy over all samples: a closed gate in a short pilot does not mean sigma = 0, and at
the minimum those samples dominate sum sigma^2 / n (benchmarks/bench_allocate.py
prints by how much, on simulated populations and on real runs).

Continuous rewards (partial credit, a judge's 7/10): sigma is the reward's own standard
deviation, not the Bernoulli one of the full-credit rate (which is near 0 for a sample
that never earns full credit however much its rewards differ). Neyman then uses
sigma~_i^2 = (n_i v_i + v_bar) / (n_i + 1), the sample's population variance v_i shrunk
by one pseudo-rollout toward the mean variance v_bar of the scored samples, so a sample
whose rewards were all equal in the pilot keeps a small non-zero sigma (the "rate" rule's
reasoning, for rewards). `reward_std` is that sigma~ (the Bernoulli std on 0/1 runs),
and the plan's variance proxy reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from curate.errors import InputError, UsageError
from curate.stats.apportion import apportion

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.prior import Prior

METHODS = ("neyman", "inverse-p", "uniform")
ZERO_SIGNAL = ("min", "drop", "rate")
DEFAULT_ZERO_SIGNAL = "rate"  # why: benchmarks/bench_allocate.py (min is worse than uniform)
DEFAULT_MIN_RUNS = 2  # a group needs two rollouts before its outcomes can differ
PLAN_COLUMNS = (
    "sample_id",
    "planned_rollouts",
    "n_rollouts",
    "successes",
    "pass_rate",
    "smoothed_pass_rate",
    "bernoulli_std",
    "reward_std",
    "zero_signal",
    "category",
)


def allocation_weights(rates: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    """Allocation weights from smoothed pass rates in (0, 1)."""
    p = np.asarray(rates, dtype=float)
    if method == "neyman":
        return np.sqrt(p * (1.0 - p))
    if method == "inverse-p":
        return 1.0 / p
    if method == "uniform":
        return np.ones_like(p)
    raise UsageError(f"unknown method '{method}' (choose from {', '.join(METHODS)})")


def variance_proxy(sigma2: Sequence[float] | np.ndarray, n: Sequence[int] | np.ndarray) -> float:
    """sum_i sigma_i^2 / n_i (DynaMO's yardstick): the variance of the averaged gradient estimate,
    up to a constant. Samples with no rollouts must have sigma^2 = 0 (they add nothing)."""
    s = np.asarray(sigma2, dtype=float)
    k = np.asarray(n, dtype=float)
    if np.any((k <= 0) & (s > 0)):
        return float("inf")
    mask = k > 0
    return float(np.sum(s[mask] / k[mask]))


def allocate(
    per_sample: pl.DataFrame,
    budget: int,
    *,
    method: str = "neyman",
    min_runs: int = DEFAULT_MIN_RUNS,
    max_runs: int | None = None,
    zero_signal: str = DEFAULT_ZERO_SIGNAL,
    prior: Prior | None = None,
    binary: bool | None = None,
) -> pl.DataFrame:
    """The plan: one row per sample (sorted by id) with `planned_rollouts` summing to `budget`.

    `per_sample` is `analyze(...).per_sample` (sample_id, n_rollouts, successes,
    pass_rate, smoothed_pass_rate, variance, category). Samples without a scored
    rollout take the prior mean (or the mean smoothed rate) and count as having signal.
    `binary`: whether the scores are 0/1 (None: every scored sample's mean equals its
    pass rate); otherwise Neyman uses the shrunk reward std (module docstring).
    """
    import polars as pl

    if method not in METHODS:
        raise UsageError(f"unknown method '{method}' (choose from {', '.join(METHODS)})")
    if zero_signal not in ZERO_SIGNAL:
        raise UsageError(
            f"unknown zero-signal rule '{zero_signal}' (choose from {', '.join(ZERO_SIGNAL)})"
        )
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 (got {budget})")
    if min_runs < 0:
        raise UsageError(f"--min-rollouts must be at least 0 (got {min_runs})")
    if max_runs is not None and max_runs < max(min_runs, 1):
        raise UsageError(f"--max-rollouts {max_runs} is below --min-rollouts {min_runs}")
    fill = prior.mean if prior is not None else per_sample["smoothed_pass_rate"].mean()
    frame = (
        per_sample.sort("sample_id")
        .with_columns(
            pl.col("smoothed_pass_rate").fill_null(fill if fill is not None else 0.5),
            ((pl.col("n_rollouts") > 0) & (pl.col("variance") == 0)).alias("zero_signal"),
        )
        .with_columns(
            (pl.col("smoothed_pass_rate") * (1 - pl.col("smoothed_pass_rate")))
            .sqrt()
            .alias("bernoulli_std")
        )
    )
    if binary is None and "mean_score" not in per_sample.columns:
        binary = True  # counts and rates only: 0/1 outcomes
    if binary is None:
        scored = per_sample.filter(pl.col("n_rollouts") > 0)
        binary = bool(((scored["mean_score"] - scored["pass_rate"]).abs() <= 1e-12).all())
    if binary:
        frame = frame.with_columns(pl.col("bernoulli_std").alias("reward_std"))
    else:
        v_bar = per_sample.filter(pl.col("n_rollouts") > 0)["variance"].mean()
        v_bar = float(v_bar) if isinstance(v_bar, int | float) else 0.0
        n = pl.col("n_rollouts").cast(pl.Float64)
        shrunk = (n * pl.col("variance").fill_null(0.0) + v_bar) / (n + 1.0)
        frame = frame.with_columns(shrunk.sqrt().alias("reward_std"))
    if zero_signal == "drop":
        frame = frame.filter(~pl.col("zero_signal"))
    if frame.height == 0:
        raise UsageError("no sample with learning signal left to allocate rollouts to")
    zero = frame["zero_signal"].to_numpy() & (zero_signal == "min")
    if method == "neyman" and not binary:
        weights = frame["reward_std"].to_numpy().astype(float)
        if not np.any(weights > 0):
            weights = np.ones(frame.height)  # every reward equal everywhere: nothing to favour
    else:
        weights = allocation_weights(frame["smoothed_pass_rate"].to_numpy(), method)
    lower = np.full(frame.height, min_runs, dtype=np.int64)
    upper = np.full(frame.height, max_runs if max_runs is not None else budget, dtype=np.int64)
    upper[zero] = min_runs  # zero signal: the minimum, whatever the method says
    low_total, high_total = int(lower.sum()), int(upper.sum())
    if budget < low_total:
        raise UsageError(
            f"--budget {budget} is below the minimum: {frame.height} samples x "
            f"--min-rollouts {min_runs} = {low_total}"
        )
    if budget > high_total:
        fixed = int(zero.sum())
        raise UsageError(
            f"--budget {budget} is above what the bounds can hold ({high_total}: "
            f"{frame.height - fixed} samples x --max-rollouts "
            f"{max_runs if max_runs is not None else budget}"
            + (f" + {fixed} zero-signal samples x --min-rollouts {min_runs}" if fixed else "")
            + ")"
        )
    counts = apportion(weights, budget, lower, upper)
    return frame.with_columns(pl.Series("planned_rollouts", counts, dtype=pl.Int64)).select(
        PLAN_COLUMNS
    )


def join_plan(frame: pl.DataFrame, plan: pl.DataFrame, *, source: object = None) -> pl.DataFrame:
    """`frame` with the plan's `planned_rollouts` joined on sample_id (null: not in the plan)."""
    import polars as pl

    missing = [c for c in ("sample_id", "planned_rollouts") if c not in plan.columns]
    if missing:
        raise InputError(
            f"not a rollout plan: missing column(s) {', '.join(missing)} "
            "(write one with `curate allocate`)",
            path=source,
        )
    plan = plan.select(
        pl.col("sample_id").cast(pl.String), pl.col("planned_rollouts").cast(pl.Int64)
    )
    if plan["sample_id"].is_duplicated().any():
        raise InputError("plan lists a sample_id more than once", path=source)
    base = frame.drop("planned_rollouts") if "planned_rollouts" in frame.columns else frame
    return base.join(plan, on="sample_id", how="left", maintain_order="left")
