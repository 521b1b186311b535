"""`curate status`: how far a run directory is, per shard and overall.

Expected rollouts come from the manifest and the samples file: every sample of
`samples.parquet` times the run's `runs`, or, for an array job (`manifest["shards"]`),
each shard's samples (curate/core/shards.py) times the runs that shard asked for
(a shard that has not started yet counts with the run's `runs`). A pair is done when
a re-run leaves it alone (`curate.core.settled`): it holds a scored rollout, or an
error that recurs (counted as done and as `settled`). A retryable error row is not
done (`curate eval` retries it on resume): it counts as missing and as an error.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from curate.core.settled import SETTLED_COLUMN, settled_error_expr, settled_expr
from curate.core.shards import shard_of
from curate.errors import InputError
from curate.store.run_dir import RolloutStore


@dataclass(frozen=True, slots=True)
class PartStatus:
    """One shard's (or the whole run's) progress."""

    shard: str | None  # "I/K"; None for the whole run
    samples: int
    runs: int | None  # None: shards with different run counts (the total)
    expected: int
    done: int  # pairs a re-run leaves alone: scored, or a settled error
    errors: int  # pairs whose stored rollout is a retryable error (retried on resume)
    settled: int = 0  # pairs done with an error that recurs (among `done`)
    writer: str | None = None  # "pid@host" of a live writer, when one holds the lock

    @property
    def missing(self) -> int:
        return self.expected - self.done

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "missing": self.missing}


@dataclass(frozen=True, slots=True)
class RunStatus:
    run_dir: Path
    total: PartStatus
    shards: list[PartStatus] = field(default_factory=list)  # empty for an unsharded run

    @property
    def complete(self) -> bool:
        return self.total.missing == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "complete": self.complete,
            **{k: v for k, v in self.total.as_dict().items() if k != "shard"},
            "shard_count": len(self.shards) or None,
            "shards": [part.as_dict() for part in self.shards],
        }


def run_status(run_dir: str | os.PathLike[str]) -> RunStatus:
    """The progress of the run in `run_dir` (InputError when it is not one)."""
    import polars as pl

    store = RolloutStore(run_dir)
    manifest = store.read_manifest()
    if manifest.get("adaptive"):
        raise InputError(
            "an adaptive run decides its own rollout counts, so nothing is 'missing'; "
            "see curate report",
            path=store.run_dir,
        )
    samples = store.read_samples()
    if samples is None or "sample_id" not in samples.columns:
        raise InputError(
            "no samples.parquet with a sample_id column: not written by curate eval yet",
            path=store.run_dir,
        )
    runs = int(manifest.get("runs") or 0)
    shards = manifest.get("shards")
    count = int(shards["count"]) if isinstance(shards, dict) and shards.get("count") else 1
    shard_runs: dict[str, Any] = (shards.get("runs") or {}) if isinstance(shards, dict) else {}
    ids = samples["sample_id"].cast(pl.String).unique()
    plan = pl.DataFrame(
        {
            "sample_id": ids,
            "_part": [shard_of(sid, count) for sid in ids.to_list()] if count > 1 else 0,
        },
        schema={"sample_id": pl.String, "_part": pl.Int64},
    )
    targets = {part: int(shard_runs.get(str(part), runs)) for part in range(count)}
    plan = plan.with_columns(
        pl.col("_part").replace_strict(targets, return_dtype=pl.Int64).alias("_runs")
    )
    if store.shard_paths():
        stored = store.rollouts(["sample_id", "rollout_idx", "error", SETTLED_COLUMN])
    else:
        stored = pl.DataFrame(
            schema={
                "sample_id": pl.String,
                "rollout_idx": pl.Int32,
                "error": pl.String,
                SETTLED_COLUMN: pl.Boolean,
            }
        )
    counted = (
        stored.join(plan, on="sample_id", how="inner")
        .filter(pl.col("rollout_idx").is_between(0, pl.col("_runs") - 1))
        .group_by("_part")
        .agg(
            settled_expr().sum().alias("done"),
            (~settled_expr()).sum().alias("errors"),
            settled_error_expr().sum().alias("settled"),
        )
    )
    by_part = {row["_part"]: row for row in counted.iter_rows(named=True)}
    sizes = dict(plan.group_by("_part").len().iter_rows())
    holders = store.shard_lock_holders() if count > 1 else {}
    parts = []
    for part in range(count):
        key = f"{part}/{count}"
        holder = holders.get(key)
        live = holder is not None and holder.alive() is not False
        parts.append(
            PartStatus(
                shard=key if count > 1 else None,
                samples=int(sizes.get(part, 0)),
                runs=targets[part],
                expected=int(sizes.get(part, 0)) * targets[part],
                done=int(by_part.get(part, {}).get("done", 0)),
                errors=int(by_part.get(part, {}).get("errors", 0)),
                settled=int(by_part.get(part, {}).get("settled", 0)),
                writer=holder.where if holder is not None and live else None,
            )
        )
    run_counts = {p.runs for p in parts}
    total = PartStatus(
        shard=None,
        samples=sum(p.samples for p in parts),
        runs=run_counts.pop() if len(run_counts) == 1 else None,
        expected=sum(p.expected for p in parts),
        done=sum(p.done for p in parts),
        errors=sum(p.errors for p in parts),
        settled=sum(p.settled for p in parts),
    )
    return RunStatus(store.run_dir, total, parts if count > 1 else [])
