"""Token usage and cost: what a run spent (`usage_summary`, the report's `usage`
section). Prices are USD per million tokens; what a run would spend is estimated in
`curate.engine.estimate`."""

from __future__ import annotations

from pathlib import Path
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


def load_token_columns(path: str | Path) -> pl.DataFrame | None:
    """The token columns of a run directory (every stored row: a rollout that a resume
    replaced was paid for too) or of a score table; None when it has none."""
    import polars as pl

    from curate.store.run_dir import RolloutStore, is_run_dir
    from curate.store.tables import read_table, scan_table

    path = Path(path)
    try:
        if path.is_dir():
            if not is_run_dir(path):
                return None
            store = RolloutStore(path)
            shards = store.shard_paths()
            if not shards or not all(c in pl.read_parquet_schema(shards[0]) for c in TOKEN_COLUMNS):
                return None
            return store.scan(list(TOKEN_COLUMNS)).drop("_shard").collect()
        # A .json file may hold one JSON array, which only the eager reader understands;
        # anything else is scanned, so a table without token columns costs no read.
        lf = read_table(path).lazy() if path.suffix.lower() == ".json" else scan_table(path)
        cols = [c for c in TOKEN_COLUMNS if c in lf.collect_schema().names()]
        if not cols:
            return None
        return lf.select(pl.col(c).cast(pl.Int64, strict=False) for c in cols).collect()
    except Exception:  # the report itself names unreadable input; usage is optional
        return None


def report_usage(
    path: str | Path, price_in: float | None, price_out: float | None
) -> dict[str, Any] | None:
    """The report's `usage` section: None when the input has no token counts and no
    price was given (so reports of plain score tables keep their shape)."""
    import polars as pl

    frame = load_token_columns(path)
    if frame is None:
        if price_in is None and price_out is None:
            return None
        frame = pl.DataFrame()
    usage = usage_summary(frame, price_in, price_out)
    no_tokens = usage["prompt_tokens"] is None and usage["completion_tokens"] is None
    if no_tokens and price_in is None and price_out is None:
        return None
    return usage
