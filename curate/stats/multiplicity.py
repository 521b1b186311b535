"""Frames whose rows stand for several samples: the `multiplicity` column of a
compressed per-sample frame (one row per distinct statistics), and the (n, c)
histogram weighted by it. Shared by the per-sample statistics (`per_sample`) and the
mixed-group model (`mixed`), below both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

# In a compressed frame (one row per distinct statistics, no sample_id), how many
# samples a row stands for. Data-set statistics weight every row by it.
MULTIPLICITY = "multiplicity"


def with_multiplicity(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with a `multiplicity` column: as it is when compressed, else all 1."""
    import polars as pl

    if MULTIPLICITY in frame.columns:
        return frame
    return frame.with_columns(pl.lit(1, dtype=pl.Int64).alias(MULTIPLICITY))


def pair_histogram(frame: pl.DataFrame, *, scored_only: bool = False) -> list[tuple[int, int, int]]:
    """Sorted (n_rollouts, successes, samples): how many samples have each (n, c) pair
    (rows, or their multiplicities in a compressed frame); with `scored_only`, pairs
    with n = 0 are left out.

    The same as a group-by on the two columns, sorted, but counted on one integer key
    n * (n_max + 1) + c (0 <= c <= n), which is several times cheaper on a million rows.
    """
    import polars as pl

    n, c = pl.col("n_rollouts"), pl.col("successes")
    if (
        MULTIPLICITY in frame.columns  # compressed: few rows, each standing for many
        or frame.height == 0
        or frame.select(n.null_count() + c.null_count()).item()
    ):
        weighted = with_multiplicity(frame)
        hist = weighted.group_by("n_rollouts", "successes").agg(pl.col(MULTIPLICITY).sum()).rows()
    else:
        width = int(frame.select(n.max()).item()) + 1
        counts = frame.select((n.cast(pl.Int64) * width + c).alias("key"))["key"].value_counts()
        hist = [(key // width, key % width, count) for key, count in counts.rows()]
    return sorted(row for row in hist if not scored_only or row[0] > 0)
