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
    import numpy as np
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


# Outcome codes, for fast comparisons on millions of rows (OUTCOMES[code] is the name).
RIGHT, WRONG, TRUNCATED = 0, 1, 2


def outcome_code_expr() -> pl.Expr:
    """Each rollout's outcome as a code (RIGHT, WRONG, TRUNCATED), null for a failed one."""
    import polars as pl

    cut = pl.col("truncated").fill_null(False)
    return (
        pl.when(cut)
        .then(pl.lit(TRUNCATED, dtype=pl.UInt8))
        .when(pl.col("error").is_not_null())
        .then(pl.lit(None, dtype=pl.UInt8))
        .when(pl.col("score") >= 1.0)
        .then(pl.lit(RIGHT, dtype=pl.UInt8))
        .otherwise(pl.lit(WRONG, dtype=pl.UInt8))
        .alias("outcome")
    )


def outcome_expr() -> pl.Expr:
    """Each rollout's outcome by name (OUTCOMES), null for a failed rollout."""
    import polars as pl

    return outcome_code_expr().replace_strict(
        list(range(len(OUTCOMES))), list(OUTCOMES), return_dtype=pl.String
    )


def nearest_rank(values: pl.Series, q: float) -> int | None:
    """The smallest value v with at least a share q of `values` <= v (None if empty)."""
    n = values.len() - values.null_count()
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    return int(values.drop_nulls().sort()[rank - 1])


def _ranked(counts: np.ndarray, q: float) -> int | None:
    """`nearest_rank` from a histogram of the values."""
    import numpy as np

    n = int(counts.sum())
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    return int(np.searchsorted(np.cumsum(counts), rank))


def _lengths(counts: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"rollouts": int(counts.sum())}
    for p in PERCENTILES:
        out[f"p{p}"] = _ranked(counts, p / 100)
    out["max"] = _ranked(counts, 1.0)
    return out


def length_summary(
    rows: pl.DataFrame,
    *,
    max_tokens: int | None = None,
    excluded: bool = False,
    samples_hint: int | None = None,
) -> dict[str, Any]:
    """The report's `lengths` section (README, JSON contract) for `rows` (see the module
    docstring). `max_tokens` is the run's own limit (None for a bare table); `excluded`
    says that the run leaves its cut-short rollouts out of the other statistics;
    `samples_hint` the number of samples with a counted rollout when the caller knows it
    (else counted here)."""
    import numpy as np
    import polars as pl

    # Outcomes and lengths first, as numpy arrays without the ids (this runs on every
    # report of a run): strings are touched only for the samples with a cut-short rollout.
    cut_np = rows["truncated"].fill_null(False).to_numpy()
    failed_np = rows["error"].is_not_null().to_numpy()
    right_np = (rows["score"] >= 1.0).fill_null(False).to_numpy()
    code = np.where(cut_np, TRUNCATED, np.where(right_np, RIGHT, WRONG)).astype(np.uint8)
    counted_np = cut_np | ~failed_np
    tokens = rows["completion_tokens"]
    has_len = counted_np & ~tokens.is_null().to_numpy()
    lens = np.clip(tokens.fill_null(0).to_numpy().astype(np.int64, copy=False), 0, None)
    total = int(counted_np.sum())
    hists = [np.bincount(lens[has_len & (code == c)]) for c in range(len(OUTCOMES))]
    by_outcome = {name: _lengths(hists[c]) for c, name in enumerate(OUTCOMES)}
    truncated = int(cut_np.sum())
    counted = pl.Series(counted_np)
    is_cut = pl.Series(cut_np)
    outcome = pl.Series("outcome", code)
    per_sample = pl.DataFrame(
        schema={"sample_id": pl.String, "rate": pl.Float64, "any_right": pl.Boolean}
    )
    samples = 0
    if truncated:
        ids = rows["sample_id"]
        samples = ids.filter(counted).n_unique() if samples_hint is None else samples_hint
        # Per-sample rates over the samples with a cut-short rollout only: the others
        # are 0, and on a run with little truncation this groups few of the rows.
        touched = ids.is_in(ids.filter(is_cut).unique().implode()) & counted
        per_sample = (
            pl.DataFrame({"sample_id": ids.filter(touched), "outcome": outcome.filter(touched)})
            .group_by("sample_id")
            .agg(
                (pl.col("outcome") == TRUNCATED).mean().alias("rate"),
                (pl.col("outcome") == RIGHT).any().alias("any_right"),
            )
        )
    elif total:
        samples = 1  # any positive count: every rate is 0
    mostly = per_sample.filter(pl.col("rate") > MOSTLY).sort("sample_id")
    recommended = _ranked(hists[RIGHT], RECOMMEND_QUANTILE)
    cut = None
    n_measured = sum(int(h.sum()) for h in hists)
    if recommended is not None and n_measured:
        longer = sum(int(h[recommended + 1 :].sum()) for h in hists)
        cut = longer / n_measured
    rates = per_sample["rate"]
    return {
        "rollouts": total,
        "truncated": truncated,
        "truncation_rate": truncated / total if total else None,
        "excluded_from_statistics": excluded,
        "per_sample_truncation_rate": {
            "mean": float(rates.sum()) / samples if samples else None,
            "max": (float(rates.max()) if rates.len() else 0.0) if samples else None,  # type: ignore[arg-type]
        },
        "samples_with_truncation": per_sample.height,
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
