"""The run directory's locks for array jobs: shard writers share RUN/.lock and each
holds its own shard lock; a whole-run writer excludes them and they exclude it."""

from __future__ import annotations

from pathlib import Path

import pytest

from curate.core.shards import ShardSpec
from curate.store.locks import RunDirBusyError
from curate.store.run_dir import RolloutStore


def refuse(run: Path, shard: ShardSpec | None, match: str) -> None:
    """A writer of `shard` (None: the whole run) is refused with `match`."""
    with pytest.raises(RunDirBusyError, match=match), RolloutStore(run).writer(shard):
        pass


def test_writers_of_different_shards_share_the_directory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    a, b = RolloutStore(run), RolloutStore(run)
    with a.writer(ShardSpec(0, 2)), b.writer(ShardSpec(1, 2)):
        assert set(a.shard_writers()) == {"0/2", "1/2"}
        holders = a.shard_lock_holders()
        assert all(h.alive() for h in holders.values())
    assert not list(run.glob(".lock*"))  # the last one out removed RUN/.lock too
    assert not run.exists()  # created by the writers, left empty: removed


def test_the_same_shard_twice_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with RolloutStore(run).writer(ShardSpec(1, 3)):
        refuse(run, ShardSpec(1, 3), r"is writing shard 1/3 of this run directory")
        # The refused writer left the holder's locks alone.
        assert set(RolloutStore(run).shard_writers()) == {"1/3"}


def test_whole_run_and_shard_writers_exclude_each_other(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with RolloutStore(run).writer(ShardSpec(0, 2)):
        refuse(run, None, r"--shard writers \(0/2: \d+@")
    with RolloutStore(run).writer():
        refuse(run, ShardSpec(0, 2), r"whole run directory \(no --shard\)")
    # Both released: either kind may write again.
    with RolloutStore(run).writer(ShardSpec(0, 2)):
        pass
    with RolloutStore(run).writer():
        pass
