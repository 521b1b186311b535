"""The run directory: manifest, input samples, and append-only rollout shards.

Layout (documented in the README):

    RUN/
      manifest.json        what produced the run (never a secret)
      samples.parquet      the input samples with their original fields + sample_id
      rollouts/part-*.parquet   append-only shards, written atomically

Readers de-duplicate on (sample_id, run_idx): a scored row beats an error row,
and a later shard beats an earlier one (a resumed run re-tries failed rollouts).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.errors import InputError
from curate.store.atomic import atomic_path, atomic_write_text
from curate.store.schema import (
    FORMAT_VERSION,
    MANIFEST_FILE,
    ROLLOUT_COLUMNS,
    ROLLOUTS_DIR,
    SAMPLES_FILE,
    rollout_schema,
)

if TYPE_CHECKING:
    import polars as pl

_shard_counter = itertools.count()


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """True when `path` looks like a directory written by `curate eval`."""
    path = Path(path)
    return path.is_dir() and ((path / MANIFEST_FILE).is_file() or (path / ROLLOUTS_DIR).is_dir())


class RolloutStore:
    """Owns one run directory on disk."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)

    # -- paths ------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.run_dir / MANIFEST_FILE

    @property
    def samples_path(self) -> Path:
        return self.run_dir / SAMPLES_FILE

    @property
    def rollouts_dir(self) -> Path:
        return self.run_dir / ROLLOUTS_DIR

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def create(self) -> None:
        """Create the directory layout (idempotent)."""
        self.rollouts_dir.mkdir(parents=True, exist_ok=True)

    # -- manifest ---------------------------------------------------------
    def read_manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("no manifest.json in run directory", path=self.run_dir) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"manifest is not valid JSON: {exc}", path=self.manifest_path) from exc
        if not isinstance(data, dict):
            raise InputError("manifest is not a JSON object", path=self.manifest_path)
        return data

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        body = {"format_version": FORMAT_VERSION, **manifest}
        atomic_write_text(self.manifest_path, json.dumps(body, indent=2, sort_keys=True) + "\n")

    # -- samples ----------------------------------------------------------
    def write_samples(self, samples: pl.DataFrame) -> None:
        with atomic_path(self.samples_path) as tmp:
            samples.write_parquet(tmp)

    def read_samples(self) -> pl.DataFrame | None:
        import polars as pl

        if not self.samples_path.is_file():
            return None
        return pl.read_parquet(self.samples_path)

    # -- rollouts ---------------------------------------------------------
    def append(self, rollouts: pl.DataFrame) -> Path | None:
        """Write `rollouts` as a new shard (atomically); columns not given are null."""
        import polars as pl

        if rollouts.height == 0:
            return None
        self.create()
        schema = rollout_schema()
        unknown = set(rollouts.columns) - set(schema)
        if unknown:
            raise ValueError(f"unknown rollout columns: {sorted(unknown)}")
        frame = rollouts.select(
            [
                (pl.col(name) if name in rollouts.columns else pl.lit(None))
                .cast(dtype)  # type: ignore[arg-type]
                .alias(name)
                for name, dtype in schema.items()
            ]
        ).sort("sample_id", "run_idx")
        # Time-ordered names: lexical order is write order, which dedup relies on.
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{next(_shard_counter):06d}.parquet"
        target = self.rollouts_dir / name
        with atomic_path(target) as tmp:
            frame.write_parquet(tmp)
        return target

    def shard_paths(self) -> list[Path]:
        if not self.rollouts_dir.is_dir():
            return []
        return sorted(p for p in self.rollouts_dir.glob("part-*.parquet") if p.is_file())

    def scan(self, columns: list[str] | None = None) -> pl.LazyFrame:
        """All shards, in write order, as one lazy frame with a `_shard` column."""
        import polars as pl

        shards = self.shard_paths()
        cols = columns or list(ROLLOUT_COLUMNS)
        if not shards:
            return pl.LazyFrame(
                schema={name: rollout_schema()[name] for name in cols}  # type: ignore[misc]
            ).with_columns(pl.lit(0, dtype=pl.Int32).alias("_shard"))
        frames = [
            pl.scan_parquet(path)
            .select(cols)
            .with_columns(pl.lit(i, dtype=pl.Int32).alias("_shard"))
            for i, path in enumerate(shards)
        ]
        return pl.concat(frames, how="vertical")

    def rollouts(self, columns: list[str] | None = None) -> pl.DataFrame:
        """De-duplicated rollouts: one row per (sample_id, run_idx)."""
        cols = list(columns or ROLLOUT_COLUMNS)
        for key in ("sample_id", "run_idx", "error"):
            if key not in cols:
                cols.append(key)
        shards = self.shard_paths()
        try:
            frame = self.scan(cols).collect()
        except Exception as exc:  # a corrupt shard: name it
            raise InputError(f"cannot read rollout shards: {exc}", path=self.rollouts_dir) from exc
        if len(shards) <= 1 and not _has_duplicate_pairs(frame):
            return frame.drop("_shard")
        return prefer_latest_scored(frame).drop("_shard")

    def completed_pairs(self) -> pl.DataFrame:
        """(sample_id, run_idx) pairs that have a scored (non-error) rollout."""
        import polars as pl

        frame = self.scan(["sample_id", "run_idx", "error"]).collect()
        return frame.filter(pl.col("error").is_null()).select("sample_id", "run_idx").unique()


def prefer_latest_scored(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (sample_id, run_idx): scored beats error, then later `_shard` wins."""
    import polars as pl

    return (
        frame.with_columns(pl.col("error").is_null().alias("_scored"))
        .sort(["sample_id", "run_idx", "_scored", "_shard"])
        .unique(subset=["sample_id", "run_idx"], keep="last", maintain_order=True)
        .drop("_scored")
    )


def _has_duplicate_pairs(frame: pl.DataFrame) -> bool:
    import polars as pl

    if frame.height == 0 or pairs_distinct(frame):
        return False
    return bool(frame.select(pl.struct("sample_id", "run_idx").is_duplicated().any()).item())


# The largest run_idx `run_bits` encodes as a bit of a UInt64.
MAX_BIT_RUN_IDX = 63


def run_bits() -> pl.Expr:
    """2**run_idx per row as UInt64, null for a run_idx outside 0..63 (or null).

    Summed over one sample's rows it has exactly one set bit per row iff no run_idx
    repeats: a repeat carries (and a UInt64 wrap-around only drops bits), and a null
    leaves a bit short. So `bits.sum().bitwise_count_ones() == len()` per sample proves
    the (sample_id, run_idx) pairs distinct with a group-by on sample_id alone.
    """
    import polars as pl

    rid = pl.col("run_idx")
    bit = pl.lit(2, dtype=pl.UInt64).pow(rid.clip(0, MAX_BIT_RUN_IDX).cast(pl.UInt32))
    return pl.when(rid.is_between(0, MAX_BIT_RUN_IDX)).then(bit)


def pairs_distinct(frame: pl.DataFrame) -> bool:
    """True when no (sample_id, run_idx) pair of `frame` repeats, proved with `run_bits`
    (several times cheaper than hashing every pair); False means "not proved"."""
    import polars as pl

    sums = (
        frame.lazy()
        .group_by("sample_id")
        .agg(pl.len().alias("rows"), run_bits().sum().alias("bits"))
        .collect()
    )
    return bool(sums.select((pl.col("bits").bitwise_count_ones() == pl.col("rows")).all()).item())
