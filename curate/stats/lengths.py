"""Completion lengths and truncation: how often rollouts were cut short, how long right
and wrong answers are, and the max_tokens that right answers need.

Pure functions of a frame with one row per rollout: `sample_id`, `score`, `error`,
`truncated` (cut short: max_tokens or reasoning never closed) and `completion_tokens`.
Token counts only: no text column is read.

Outcomes, one per rollout: `truncated` when cut short (whatever it scored), else
`right` (full credit), `wrong` (anything less), and failed rollouts (an error that is
not a truncation) are left out. The recommended max_tokens is the nearest-rank 99th
percentile of the right answers' lengths: the smallest L within which 99% of them
finish. Its cost is the share of all measured rollouts longer than L (the ones it would
have cut). When some rollouts were cut short, right answers longer than the run's limit
could not be seen, so L is a lower bound (`recommended_is_lower_bound`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import polars as pl

OUTCOMES: Final = ("right", "wrong", "truncated")
PERCENTILES: Final = (50, 90, 99)
# Right answers within this length ... (the recommendation's quantile).
RECOMMEND_QUANTILE: Final = 0.99
# More than this share of rollouts cut short: a warning.
WARN_TRUNCATED: Final = 0.05
# A sample with more than this share of its rollouts cut short is "mostly truncated".
MOSTLY: Final = 0.5
# Ids of mostly-truncated samples listed in the JSON (the count is always whole).
LISTED_IDS: Final = 20


def outcome_expr() -> pl.Expr:
    """Each rollout's outcome (OUTCOMES), null for a failed rollout."""
    import polars as pl

    cut = pl.col("truncated").fill_null(False)
    return (
        pl.when(cut)
        .then(pl.lit("truncated"))
        .when(pl.col("error").is_not_null())
        .then(pl.lit(None, dtype=pl.String))
        .when(pl.col("score") >= 1.0)
        .then(pl.lit("right"))
        .otherwise(pl.lit("wrong"))
        .alias("outcome")
    )


def nearest_rank(values: pl.Series, q: float) -> int | None:
    """The smallest value v with at least a share q of `values` <= v (None if empty)."""
    n = values.len() - values.null_count()
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    return int(values.drop_nulls().sort()[rank - 1])


def _lengths(values: pl.Series) -> dict[str, Any]:
    out: dict[str, Any] = {"rollouts": int(values.len())}
    for p in PERCENTILES:
        out[f"p{p}"] = nearest_rank(values, p / 100)
    out["max"] = None if values.len() == 0 else int(values.max())  # type: ignore[arg-type]
    return out


def length_summary(
    rows: pl.DataFrame, *, max_tokens: int | None = None, excluded: bool = False
) -> dict[str, Any]:
    """The report's `lengths` section (README, JSON contract) for `rows` (see the module
    docstring). `max_tokens` is the run's own limit (None for a bare table); `excluded`
    says that the run leaves its cut-short rollouts out of the other statistics."""
    import polars as pl

    frame = rows.select(
        "sample_id", pl.col("completion_tokens").cast(pl.Int64), outcome_expr()
    ).filter(pl.col("outcome").is_not_null())
    total = frame.height
    measured = frame.filter(pl.col("completion_tokens").is_not_null())
    by_outcome = {
        name: _lengths(measured.filter(pl.col("outcome") == name)["completion_tokens"])
        for name in OUTCOMES
    }
    per_sample = frame.group_by("sample_id").agg(
        (pl.col("outcome") == "truncated").mean().alias("rate"),
        (pl.col("outcome") == "right").any().alias("any_right"),
    )
    mostly = per_sample.filter(pl.col("rate") > MOSTLY).sort("sample_id")
    truncated = int((frame["outcome"] == "truncated").sum())
    right = measured.filter(pl.col("outcome") == "right")["completion_tokens"]
    recommended = nearest_rank(right, RECOMMEND_QUANTILE)
    cut = None
    if recommended is not None and measured.height:
        cut = float((measured["completion_tokens"] > recommended).mean())  # type: ignore[arg-type]
    rates = per_sample["rate"]
    return {
        "rollouts": total,
        "truncated": truncated,
        "truncation_rate": truncated / total if total else None,
        "excluded_from_statistics": excluded,
        "per_sample_truncation_rate": {
            "mean": float(rates.mean()) if rates.len() else None,  # type: ignore[arg-type]
            "max": float(rates.max()) if rates.len() else None,  # type: ignore[arg-type]
        },
        "samples_with_truncation": int((rates > 0).sum()),
        "mostly_truncated_samples": mostly.height,
        # "Always wrong" here may only be "too short": these never finished a right answer.
        "mostly_truncated_never_right": int((~mostly["any_right"]).sum()),
        "mostly_truncated_ids": mostly["sample_id"].head(LISTED_IDS).to_list(),
        "completion_tokens": by_outcome,
        "max_tokens": max_tokens,
        "recommended_max_tokens": recommended,
        "recommended_cut_share": cut,
        # Right answers that would have needed more than the run allowed were cut short
        # and never counted as right: the recommendation is then a lower bound.
        "recommended_is_lower_bound": truncated > 0,
    }


def length_warnings(section: dict[str, Any]) -> list[str]:
    """The report's warnings about truncation."""
    out = []
    rate = section.get("truncation_rate")
    if rate is not None and rate > WARN_TRUNCATED:
        line = (
            f"{rate:.1%} of rollouts were cut short (max_tokens or unclosed reasoning): "
            "their scores say more about the length limit than about the model"
        )
        if section.get("recommended_max_tokens") is not None:
            line += (
                f"; right answers finish within {section['recommended_max_tokens']} tokens (p99)"
            )
        else:
            line += "; raise --max-tokens"
        out.append(line)
    if section.get("mostly_truncated_samples"):
        n = section["mostly_truncated_samples"]
        out.append(
            f"{n} sample{'' if n == 1 else 's'} had most rollouts cut short: "
            "'always incorrect' there may only mean 'too short'"
        )
    return out
