"""Weights and difficulty in the forms trainers read.

Most GRPO trainers read no weight column: a sample's weight can only reach them as how
often the sample appears. `expand_by_frequency` repeats each kept sample a number of
times proportional to its weight (largest-remainder apportionment of the total,
`curate.stats.apportion`), so that an epoch over the export weights samples as the
weights say. Curriculum trainers read a difficulty instead: `difficulty_expr` labels
each sample easy, medium or hard from its pass rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from curate.errors import UsageError
from curate.stats.apportion import apportion
from curate.stats.columns import COPIES_COLUMN, DIFFICULTY_COLUMN

DIFFICULTY_LEVELS = ("easy", "medium", "hard")
# Pass rates above the upper cut are easy, below the lower cut hard.
DEFAULT_CUTS = (1 / 3, 2 / 3)


@dataclass(frozen=True, slots=True)
class Frequency:
    """What `expand_by_frequency` did: rows written, samples given none."""

    rows: int
    samples: int
    left_out: int  # kept samples whose weight earned no copy at this total
    max_copies: int


def parse_cuts(text: str | tuple[float, float] | None) -> tuple[float, float]:
    """'LO:HI' (pass rates, 0 <= LO < HI <= 1) -> (LO, HI)."""
    if text is None:
        return DEFAULT_CUTS
    if isinstance(text, tuple):
        lo, hi = text
    else:
        first, sep, second = text.partition(":")
        try:
            if not sep:
                raise ValueError
            lo, hi = float(first), float(second)
        except ValueError:
            raise UsageError(f"--difficulty-cuts {text!r}: expected LO:HI, e.g. 0.3:0.7") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise UsageError(f"--difficulty-cuts {lo:g}:{hi:g}: expected 0 <= LO < HI <= 1")
    return lo, hi


def difficulty_expr(
    rate_column: str, cuts: tuple[float, float], name: str = DIFFICULTY_COLUMN
) -> pl.Expr:
    """easy (pass rate > HI), hard (< LO), else medium; null for an unscored sample."""
    lo, hi = cuts
    rate = pl.col(rate_column)
    return (
        pl.when(rate.is_null())
        .then(None)
        .when(rate > hi)
        .then(pl.lit("easy"))
        .when(rate < lo)
        .then(pl.lit("hard"))
        .otherwise(pl.lit("medium"))
        .alias(name)
    )


def expand_by_frequency(
    kept: pl.DataFrame, weights: pl.DataFrame, total: int | None
) -> tuple[pl.DataFrame, Frequency]:
    """`kept` with each sample repeated in proportion to its weight (`weights`: columns
    sample_id and weight, one row per kept sample), `total` rows in all (default: as
    many as kept samples); a `copies` column says how many times each appears."""
    if total is not None and total < 1:
        raise UsageError("--total must be at least 1")
    size = total if total is not None else kept.height
    joined = (
        kept.select("sample_id")
        .with_row_index("__row")
        .join(
            weights.select(pl.col("sample_id").cast(pl.String), pl.col("weight").cast(pl.Float64)),
            left_on=pl.col("sample_id").cast(pl.String),
            right_on="sample_id",
            how="left",
        )
        .sort("__row")
    )
    values = joined["weight"].fill_null(0.0).to_numpy()
    if not np.all(np.isfinite(values)) or (values < 0).any():
        raise UsageError("--as-frequency needs finite weights of 0 or more")
    if values.sum() <= 0:
        raise UsageError("--as-frequency: every kept sample has weight 0")
    counts = apportion(values, size)
    index = np.repeat(np.arange(kept.height), counts)
    expanded = kept.with_columns(pl.Series(COPIES_COLUMN, counts, dtype=pl.Int64))[index]
    return expanded, Frequency(
        rows=int(counts.sum()),
        samples=int((counts > 0).sum()),
        left_out=int((counts == 0).sum()),
        max_copies=int(counts.max()) if counts.size else 0,
    )


def pool_path(output: str, level: str) -> str:
    """OUT.jsonl -> OUT.easy.jsonl (OUT -> OUT.easy for directory formats)."""
    path = Path(output)
    if path.suffix:
        return str(path.with_name(f"{path.stem}.{level}{path.suffix}"))
    return str(path.with_name(f"{path.name}.{level}"))
