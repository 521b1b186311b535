"""De-duplication of rollout rows: one row per (sample_id, rollout_idx).

A scored row beats an error row (a resumed run re-tries failed rollouts), and of two
error rows the later shard wins. Two *scored* rows with different scores are a
conflict (two writers at once): reading refuses them rather than pick one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from curate.errors import InputError

if TYPE_CHECKING:
    import polars as pl


def prefer_latest_scored(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (sample_id, rollout_idx): scored beats error, then later `_shard` wins."""
    import polars as pl

    return (
        frame.with_columns(pl.col("error").is_null().alias("_scored"))
        .sort(["sample_id", "rollout_idx", "_scored", "_shard"])
        .unique(subset=["sample_id", "rollout_idx"], keep="last", maintain_order=True)
        .drop("_scored")
    )


def resolve_repeats(frame: pl.DataFrame, shards: list[Path], where: Path) -> pl.DataFrame:
    """One row per pair of `frame` (sorted by sample_id, rollout_idx, _shard), refusing
    conflicts. Repeats sit next to each other, so only they are grouped and sorted."""
    import polars as pl

    sid, rid = pl.col("sample_id"), pl.col("rollout_idx")
    same_prev = (sid == sid.shift(1)) & (rid == rid.shift(1))
    same_next = (sid == sid.shift(-1)) & (rid == rid.shift(-1))
    rows = frame.with_row_index("_row")
    repeated = rows.filter((same_prev | same_next).fill_null(False))
    _refuse_conflicts(repeated, shards, where)
    winners = prefer_latest_scored(repeated)["_row"]
    losers = repeated["_row"].filter(~repeated["_row"].is_in(winners.implode()))
    return rows.filter(~pl.col("_row").is_in(losers.implode())).drop("_row")


def _refuse_conflicts(frame: pl.DataFrame, shards: list[Path], where: Path) -> None:
    """InputError when a (sample_id, rollout_idx) has scored rows with different scores.

    A scored row replacing an error row (a resume re-trying a failed rollout) and an
    exact repeat are not conflicts. Only the repeated pairs are looked at.
    """
    import polars as pl

    scored = frame.filter(
        pl.struct("sample_id", "rollout_idx").is_duplicated() & pl.col("error").is_null()
    )
    conflicts = (
        scored.group_by("sample_id", "rollout_idx")
        .agg(
            pl.col("score").n_unique().alias("_scores"),
            pl.struct("_shard", "score").sort_by("_shard").alias("_rows"),
        )
        .filter(pl.col("_scores") > 1)
        .sort("sample_id", "rollout_idx")
    )
    if conflicts.height == 0:
        return
    first = conflicts.row(0, named=True)
    seen = ", ".join(f"{r['score']:g} in {shards[r['_shard']].name}" for r in first["_rows"])
    n_shards = conflicts["_rows"].explode().struct.field("_shard").n_unique()
    raise InputError(
        f"{conflicts.height} (sample_id, rollout_idx) pair(s) scored twice with different "
        f"scores, across {n_shards} shard(s): sample {first['sample_id']!r} run "
        f"{first['rollout_idx']} scored {seen}; two writers ran at once? Re-run with "
        "--force-new (or into another --out) to regenerate the run",
        path=where,
    )


def strictly_sorted(frame: pl.DataFrame) -> bool:
    """True when (sample_id, rollout_idx) rises strictly row by row: sorted, no repeats."""
    import polars as pl

    sid, rid = pl.col("sample_id"), pl.col("rollout_idx")
    prev = sid.shift(1)
    rising = (pl.int_range(pl.len()) == 0) | (sid > prev) | ((sid == prev) & (rid > rid.shift(1)))
    return bool(frame.select(rising.fill_null(False).all()).item())


# The largest rollout_idx `run_bits` encodes as a bit of a UInt64.
MAX_BIT_RUN_IDX = 63


def run_bits() -> pl.Expr:
    """2**rollout_idx per row as UInt64, null for a rollout_idx outside 0..63 (or null).

    Summed over one sample's rows it has exactly one set bit per row iff no rollout_idx
    repeats: a repeat carries (and a UInt64 wrap-around only drops bits), and a null
    leaves a bit short. So `bits.sum().bitwise_count_ones() == len()` per sample proves
    the (sample_id, rollout_idx) pairs distinct with a group-by on sample_id alone.
    """
    import polars as pl

    rid = pl.col("rollout_idx")
    bit = pl.lit(2, dtype=pl.UInt64).pow(rid.clip(0, MAX_BIT_RUN_IDX).cast(pl.UInt32))
    return pl.when(rid.is_between(0, MAX_BIT_RUN_IDX)).then(bit)


def pairs_distinct(frame: pl.DataFrame) -> bool:
    """True when no (sample_id, rollout_idx) pair of `frame` repeats, proved with `run_bits`
    (several times cheaper than hashing every pair); False means "not proved"."""
    import polars as pl

    sums = (
        frame.lazy()
        .group_by("sample_id")
        .agg(pl.len().alias("rows"), run_bits().sum().alias("bits"))
        .collect()
    )
    return bool(sums.select((pl.col("bits").bitwise_count_ones() == pl.col("rows")).all()).item())
