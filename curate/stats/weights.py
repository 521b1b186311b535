"""Objective weights: w(p) = f'(p) for a pass-rate objective J_f = E[f(p)]
(Reinforce-Ada's non-linear objectives).

Choosing f decides which prompts the gradient emphasises:

    linear  f = p                 w = 1
    log     f = log p             w = 1/p
    sqrt    f = sqrt p            w = 1 / (2 sqrt p)
    arcsin  f = 2 arcsin(sqrt p)  w = 1 / sqrt(p (1 - p))   (standardised GRPO's implicit weight)

The weights are computed on the smoothed pass rate (the posterior mean under the
pass-rate prior, `curate.stats.prior`) clipped to [delta, 1 - delta]
(w is steep near 0 and 1, and a small group's raw rate is often exactly 0 or 1), and
normalised to mean 1 over the samples given, so they rescale without changing the
overall step size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from curate.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

OBJECTIVES = ("linear", "log", "sqrt", "arcsin")
# `--weights std`: not an objective's derivative but the sample's own reward spread,
# the per-sample standard deviation of its rollouts' scores (0/1 and partial credit
# alike), normalised to mean 1: a sample whose rewards never differ weighs 0.
STD = "std"
WEIGHT_KINDS = (*OBJECTIVES, STD)
STD_COLUMN = "std_dev"
DEFAULT_DELTA = 0.05


def check_objective(objective: str, delta: float) -> None:
    """UsageError unless the objective is known and 0 < delta < 0.5."""
    if objective not in WEIGHT_KINDS:
        raise UsageError(f"unknown objective '{objective}' (choose from {', '.join(WEIGHT_KINDS)})")
    if not (0.0 < delta < 0.5) or math.isnan(delta):
        raise UsageError(f"--weight-delta must be in (0, 0.5) (got {delta})")


def objective_weight(p: float, objective: str) -> float:
    """The unnormalised weight f'(p) at one pass rate in (0, 1)."""
    if objective == "linear":
        return 1.0
    if objective == "log":
        return 1.0 / p
    if objective == "sqrt":
        return 0.5 / math.sqrt(p)
    if objective == "arcsin":
        return 1.0 / math.sqrt(p * (1.0 - p))
    raise UsageError(f"unknown objective '{objective}' (choose from {', '.join(OBJECTIVES)})")


def objective_weights(
    rates: Sequence[float | None], objective: str, delta: float = DEFAULT_DELTA
) -> list[float | None]:
    """f'(clip(p, delta, 1 - delta)) for each rate, normalised to mean 1 (None stays None)."""
    check_objective(objective, delta)
    raw = [
        None if p is None else objective_weight(min(max(p, delta), 1.0 - delta), objective)
        for p in rates
    ]
    present = [w for w in raw if w is not None]
    if not present:
        return raw
    mean = sum(present) / len(present)
    return [None if w is None else w / mean for w in raw]


def weight_expr(
    objective: str, delta: float = DEFAULT_DELTA, rate: str = "smoothed_pass_rate"
) -> pl.Expr:
    """`objective_weights` as a polars expression over the column `rate` of one frame."""
    import polars as pl

    check_objective(objective, delta)
    if objective == STD:
        spread = pl.col(STD_COLUMN)
        return spread / spread.mean()
    p = pl.col(rate).clip(delta, 1.0 - delta)
    raw = {
        "linear": pl.when(p.is_not_null()).then(pl.lit(1.0)),
        "log": 1.0 / p,
        "sqrt": 0.5 / p.sqrt(),
        "arcsin": 1.0 / (p * (1.0 - p)).sqrt(),
    }[objective]
    return raw / raw.mean()


def add_weights(
    frame: pl.DataFrame,
    objective: str,
    delta: float = DEFAULT_DELTA,
    *,
    rate: str = "smoothed_pass_rate",
    column: str = "weight",
) -> pl.DataFrame:
    """`frame` with a `weight` column normalised to mean 1 over its rows."""
    return frame.with_columns(weight_expr(objective, delta, rate).alias(column))


def weight_table(
    frame: pl.DataFrame,
    objective: str,
    delta: float = DEFAULT_DELTA,
    *,
    rate: str = "smoothed_pass_rate",
) -> pl.DataFrame:
    """(sample_id, weight) for the rows of `frame`: the shape exports join weights from.

    `std` reads the frame's `std_dev`; when every row's is 0 there is nothing to
    normalise by (each weight would be 0/0): UsageError."""
    column = STD_COLUMN if objective == STD else rate
    if objective == STD and frame.height and not (frame[STD_COLUMN].fill_null(0.0) > 0).any():
        raise UsageError(
            "--weights std: every kept sample's rewards are all equal (standard deviation "
            "0), so every weight would be 0; keep mixed samples or choose another weight"
        )
    return add_weights(frame.select("sample_id", column), objective, delta, rate=rate).select(
        "sample_id", "weight"
    )
