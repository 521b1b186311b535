"""`curate eval --shard I/K`: one array-job task's share of a run.

The samples a shard owns are `curate.core.shards` (a stable hash of the sample id);
the locks that let K shard writers share one run directory are the store's
(`RolloutStore.writer(shard=...)`). This module holds what the engine adds: the
manifest check and update that every shard writer does under the manifest lock, so
that the first writer's settings bind every other shard, and the manifest records
what `curate status` needs (the shard count and each shard's run count).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from curate.core.shards import ShardSpec
from curate.errors import UsageError
from curate.store.run_dir import RolloutStore, RunDirBusyError

if TYPE_CHECKING:
    import polars as pl

# How the manifest names the assignment, for readers outside curate.
SHARD_HASH = "sha256(sample_id)[:8] big-endian mod count"


def shard_frame(frame: pl.DataFrame, shard: ShardSpec | None) -> pl.DataFrame:
    """The rows of `frame` (with a sample_id column) that `shard` owns; all without one."""
    import polars as pl

    if shard is None:
        return frame
    owned = shard.select(frame["sample_id"].cast(pl.String).to_list())
    return frame.filter(pl.col("sample_id").is_in(owned))


def binding_manifest(store: RolloutStore, shard: ShardSpec) -> dict[str, Any] | None:
    """The manifest a shard writer must match: the stored one once any rollout is
    stored or another shard writer is at work (its settings are fixed from its start,
    before it has stored anything); None for a fresh directory. Call under
    `store.manifest_lock()`."""
    if not store.exists():
        return None
    others = {key for key in store.shard_writers() if key != str(shard)}
    if not store.shard_paths() and not others:
        return None
    return store.read_manifest()


def refuse_other_shard_counts(store: RolloutStore, shard: ShardSpec) -> None:
    """RunDirBusyError when a writer of the same run splits it into another count of
    shards: their samples overlap, so both would write the same rollouts."""
    for key, holder in store.shard_writers().items():
        count = int(key.split("/")[1])
        if count != shard.count:
            raise RunDirBusyError(
                f"{holder.describe()} ({holder.where}) is writing shard {key} of this run "
                f"directory; every shard of one run needs the same K (here {shard.count})",
                path=store.run_dir,
            )


def record_shard(
    store: RolloutStore,
    shard: ShardSpec,
    runs: int,
    limit: int | None,
    build: Callable[[dict[str, Any] | None], dict[str, Any]],
    check: Callable[[dict[str, Any] | None, dict[str, Any]], None],
    samples: pl.DataFrame,
) -> dict[str, Any]:
    """Check this shard's settings against the run's and write the manifest (and the
    samples, when this writer is the first): one atomic step among shard writers.

    `build(previous)` makes this writer's manifest, `check(previous, manifest)`
    refuses score-changing differences (the resume check). Returns the manifest.
    """
    with store.manifest_lock():
        refuse_other_shard_counts(store, shard)
        previous = binding_manifest(store, shard)
        manifest = build(previous)
        check(previous, manifest)
        if previous is not None and previous.get("limit") != limit:
            raise UsageError(
                f"{store.run_dir}: this run was made with --limit {previous.get('limit')}, "
                f"this shard asks for --limit {limit}; every shard of a run needs the same "
                "samples"
            )
        shards_runs: dict[str, int] = {}
        earlier = (previous or {}).get("shards")
        if isinstance(earlier, dict) and earlier.get("count") == shard.count:
            shards_runs = {str(k): int(v) for k, v in (earlier.get("runs") or {}).items()}
        shards_runs[str(shard.index)] = runs
        manifest["shards"] = {
            "count": shard.count,
            "hash": SHARD_HASH,
            "runs": dict(sorted(shards_runs.items(), key=lambda kv: int(kv[0]))),
        }
        # The run's `runs`: the most any shard asked for, so that a whole-run reader
        # (the report's nominal N) sees the run's, not the last shard's.
        manifest["runs"] = max(shards_runs.values())
        store.create()
        if previous is None or not store.samples_path.is_file():
            store.write_samples(samples)
        store.write_manifest(manifest)
    return manifest
