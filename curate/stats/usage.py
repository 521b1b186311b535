"""Token usage and cost: what a run spent (`usage_summary`, the report's `usage`
section). Prices are USD per million tokens; what a run would spend is estimated in
`curate.evaluation.estimate`. Pure functions: the store reads the token columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens")


def cost_usd(
    prompt_tokens: float | None,
    completion_tokens: float | None,
    price_in: float | None,
    price_out: float | None,
) -> float | None:
    """The cost at the given prices (a price not given counts as 0); None without prices."""
    if price_in is None and price_out is None:
        return None
    spent_in = (prompt_tokens or 0) * (price_in or 0.0)
    spent_out = (completion_tokens or 0) * (price_out or 0.0)
    return (spent_in + spent_out) / 1e6


def usage_summary(
    rollouts: pl.DataFrame, price_in: float | None = None, price_out: float | None = None
) -> dict[str, Any]:
    """{prompt_tokens, completion_tokens, cost_usd} summed over `rollouts`; a count is None
    when the column is missing or empty, the cost None without prices."""
    totals: dict[str, int | None] = {}
    for col in TOKEN_COLUMNS:
        if col in rollouts.columns and rollouts[col].null_count() < rollouts.height:
            totals[col] = int(rollouts[col].sum())
        else:
            totals[col] = None
    return {
        "prompt_tokens": totals["prompt_tokens"],
        "completion_tokens": totals["completion_tokens"],
        "cost_usd": cost_usd(
            totals["prompt_tokens"], totals["completion_tokens"], price_in, price_out
        ),
    }


def usage_section(
    tokens: pl.DataFrame | None, price_in: float | None, price_out: float | None
) -> dict[str, Any] | None:
    """The report's `usage` section from the input's token columns (None when it has
    none): None when there are no token counts and no price was given (so reports of
    plain score tables keep their shape)."""
    import polars as pl

    if tokens is None:
        if price_in is None and price_out is None:
            return None
        tokens = pl.DataFrame()
    usage = usage_summary(tokens, price_in, price_out)
    no_tokens = usage["prompt_tokens"] is None and usage["completion_tokens"] is None
    if no_tokens and price_in is None and price_out is None:
        return None
    return usage
