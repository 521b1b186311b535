"""Run-directory faults at the store: the writer lock, conflicting
duplicates, unreadable shards, mistyped manifests, and what a resume may rely on."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.errors import InputError, RunError
from curate.store.run_dir import (
    LockHolder,
    RolloutStore,
    RunDirBusyError,
    manifest_type_problem,
    set_aside_corrupt_shards,
)
from tests.conftest import rollout_frame

# -- the writer lock ---------------------------------------------------------------


def test_second_writer_is_refused_naming_the_first(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first, second = RolloutStore(run), RolloutStore(run)
    with first.writer():
        info = json.loads(first.lock_path.read_text())
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
        with pytest.raises(RunDirBusyError) as exc, second.writer():
            pytest.fail("a second writer got the lock")
    message = str(exc.value)
    assert message.startswith(f"{run}: another curate eval (pid {os.getpid()} on ")
    assert ", since " in message
    assert message.endswith("is writing this run directory; wait for it or use another --out")
    assert isinstance(exc.value, RunError) and exc.value.exit_code == 1
    # Released: the next writer gets it, and no lock file is left behind.
    assert not first.lock_path.exists()
    with second.writer():
        assert second.writer_held()
    assert not second.writer_held()


def test_writer_is_reentrant_and_released_on_error(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    with pytest.raises(KeyError), store.writer(), store.writer():
        store.append(rollout_frame([("a", 0, 1.0, None)]))
        raise KeyError("boom")
    with RolloutStore(tmp_path / "run").writer():  # released despite the error
        pass
    assert [p.name for p in store.run_dir.iterdir()] == ["rollouts"]


def test_writer_removes_the_directories_it_created_when_nothing_was_written(
    tmp_path: Path,
) -> None:
    store = RolloutStore(tmp_path / "runs" / "new")
    with pytest.raises(RuntimeError), store.writer():
        assert store.lock_path.is_file()
        raise RuntimeError("the engine did not start")
    assert list(tmp_path.iterdir()) == []  # not even runs/


def test_a_stale_lock_file_is_taken_over(tmp_path: Path) -> None:
    """A killed writer leaves its lock file behind, but not its lock."""
    store = RolloutStore(tmp_path / "run")
    store.run_dir.mkdir()
    store.lock_path.write_text('{"pid": 1, "host": "gone", "since": 0}\n')
    with store.writer():
        assert json.loads(store.lock_path.read_text())["pid"] == os.getpid()
    assert not store.lock_path.exists()


def test_a_run_directory_that_is_a_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("not a directory")
    with (
        pytest.raises(InputError, match="not a directory"),
        RolloutStore(tmp_path / "run").writer(),
    ):
        pass


def test_lock_holder_description() -> None:
    assert LockHolder(None, None, None).describe() == "another curate eval"
    text = LockHolder(1234, "gpu-7", 0.0).describe()
    assert text.startswith("another curate eval (pid 1234 on gpu-7, since 19")  # a past date


# -- conflicting duplicates -------------------------------------------------------


def test_two_shards_scoring_a_pair_differently_are_refused(store: RolloutStore) -> None:
    first = store.append(
        rollout_frame([("a", 0, 1.0, None), ("a", 1, 0.0, None), ("b", 0, 1.0, None)])
    )
    second = store.append(
        rollout_frame([("a", 0, 0.0, None), ("a", 1, 0.0, None), ("b", 0, 0.0, None)])
    )
    assert first is not None and second is not None
    with pytest.raises(InputError) as info:
        store.rollouts()
    message = str(info.value)
    assert message.startswith(f"{store.rollouts_dir}: 2 (sample_id, rollout_idx) pair(s) ")
    assert f"sample 'a' run 0 scored 1 in {first.name}, 0 in {second.name}" in message
    assert "across 2 shard(s)" in message and "--force-new" in message
    assert "\n" not in message
    # Also when the caller did not ask for scores (planning a resume).
    with pytest.raises(InputError, match="scored twice"):
        store.rollouts(["sample_id", "rollout_idx"])


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # A resume re-trying a failed rollout: the score replaces the error.
        ([("a", 0, None, "timeout")], (1.0, None)),
        # An exact repeat.
        ([("a", 0, 1.0, None)], (1.0, None)),
        # A later error does not undo a score.
        ([("a", 0, None, "rate limited")], (1.0, None)),
    ],
)
def test_replacements_and_repeats_are_not_conflicts(
    store: RolloutStore, rows: list[Any], expected: tuple[float | None, str | None]
) -> None:
    store.append(rollout_frame(rows))
    store.append(rollout_frame([("a", 0, 1.0, None)]))
    store.append(rollout_frame(rows))
    frame = store.rollouts()
    assert frame.select("score", "error").rows() == [expected]
    assert frame.columns[:4] == ["sample_id", "rollout_idx", "score", "error"]


def test_requested_columns_are_kept_as_before(store: RolloutStore) -> None:
    store.append(rollout_frame([("a", 0, 1.0, None)]))
    assert store.rollouts(["sample_id", "rollout_idx"]).columns == [
        "sample_id",
        "rollout_idx",
        "error",
    ]
    assert store.rollouts(["completion"]).columns == [
        "completion",
        "sample_id",
        "rollout_idx",
        "error",
    ]


def test_several_shards_out_of_order_come_back_sorted(store: RolloutStore) -> None:
    store.append(rollout_frame([("c", 0, 1.0, None), ("c", 1, 0.0, None)]))
    store.append(rollout_frame([("a", 1, 1.0, None), ("b", 0, None, "x")]))
    store.append(rollout_frame([("a", 0, 0.0, None)]))
    got = store.rollouts(["sample_id", "rollout_idx", "score"]).rows()
    assert got == [
        ("a", 0, 0.0, None),
        ("a", 1, 1.0, None),
        ("b", 0, None, "x"),
        ("c", 0, 1.0, None),
        ("c", 1, 0.0, None),
    ]


# -- unreadable shards --------------------------------------------------------------


def _shards(store: RolloutStore, n: int) -> list[Path]:
    return [store.append(rollout_frame([(f"s{i}", 0, 1.0, None)])) for i in range(n)]  # type: ignore[misc]


def test_the_unreadable_shard_is_named_among_many(store: RolloutStore) -> None:
    paths = _shards(store, 30)
    paths[17].write_bytes(b"PAR1 not really")
    paths[23].write_bytes(paths[23].read_bytes()[:-20])  # truncated by an interrupted copy
    with pytest.raises(InputError) as info:
        store.rollouts()
    message = str(info.value)
    assert message.startswith(f"{paths[17]}: cannot read rollout shard: not a readable Parquet")
    assert "(1 more unreadable shard(s))" in message
    with pytest.raises(InputError, match=paths[17].name):
        store.completed_pairs()


def test_a_shard_with_a_mistyped_column_is_named(store: RolloutStore) -> None:
    store.append(rollout_frame([("a", 0, 1.0, None)]))
    odd = store.rollouts_dir / "part-99999999999999999999-1-000000.parquet"
    rollout_frame([("b", 0, 1.0, None)]).with_columns(pl.col("score").cast(pl.Utf8)).write_parquet(
        odd
    )
    with pytest.raises(InputError, match="column 'score' is String, expected Float64") as info:
        store.rollouts(["sample_id", "rollout_idx", "score", "error"])
    assert str(info.value).startswith(f"{odd}: ")


def test_set_aside_moves_only_unreadable_shards(store: RolloutStore) -> None:
    paths = _shards(store, 5)
    paths[1].write_bytes(b"garbage")
    paths[3].write_bytes(b"")
    moved = set_aside_corrupt_shards(store)
    assert [p.name for p in moved] == [paths[1].name, paths[3].name]
    assert all(p.parent == store.rollouts_dir / "corrupt" and p.is_file() for p in moved)
    assert store.shard_paths() == [paths[0], paths[2], paths[4]]
    assert sorted(store.rollouts()["sample_id"]) == ["s0", "s2", "s4"]  # every good rollout
    assert set_aside_corrupt_shards(store) == []
    # A second shard set aside under a name already there keeps both.
    (store.rollouts_dir / paths[1].name).write_bytes(b"again")
    again = set_aside_corrupt_shards(store)
    assert len(again) == 1 and again[0] != moved[0] and moved[0].read_bytes() == b"garbage"


def test_unreadable_samples_file_is_named(store: RolloutStore) -> None:
    store.samples_path.write_bytes(b"nope")
    with pytest.raises(InputError, match="cannot read the samples file") as info:
        store.read_samples()
    assert str(info.value).startswith(f"{store.samples_path}: ")


# -- manifest field types ------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        (
            {"adaptive_policy": 3},
            "field 'adaptive_policy' is an integer, expected an object or null",
        ),
        ({"sampling": 5}, "field 'sampling' is an integer, expected an object"),
        ({"sampling": {"stop": 5}}, "field 'sampling.stop' is an integer, expected an array"),
        ({"sampling": {"stop": ["a", 1]}}, "field 'sampling.stop' holds a non-string"),
        ({"sampling": {"temperature": "hot"}}, "field 'sampling.temperature' is a string"),
        ({"runs": "8"}, "field 'runs' is a string, expected an integer"),
        ({"runs": True}, "field 'runs' is true or false, expected an integer"),
        ({"seed": 1.5}, "field 'seed' is a number, expected an integer"),
        ({"adaptive": 1}, "field 'adaptive' is an integer, expected true or false"),
        ({"model": None}, "field 'model' is null, expected a string"),
        ({"engine_options": []}, "field 'engine_options' is an array, expected an object"),
    ],
)
def test_mistyped_manifest_fields_are_named(
    store: RolloutStore, patch: dict[str, Any], problem: str
) -> None:
    store.manifest_path.write_text(json.dumps({"model": "m", **patch}))
    with pytest.raises(InputError) as info:
        store.read_manifest()
    assert str(info.value).startswith(f"{store.manifest_path}: manifest {problem}")


def test_well_typed_manifests_pass() -> None:
    good = {
        "runs": 8,
        "seed": 0,
        "limit": None,
        "sampling": {"temperature": 1, "top_p": 0.95, "max_tokens": 256, "stop": ["\n"]},
        "adaptive": False,
        "adaptive_policy": None,
        "system": None,
        "n_rollouts": "anything: unknown fields pass",
    }
    assert manifest_type_problem(good) is None


# -- what a resume relies on --------------------------------------------------------


def test_previous_manifest_needs_a_rollout(store: RolloutStore) -> None:
    assert store.previous_manifest() is None  # a manifest, but no rollout yet
    store.manifest_path.write_text('{"runs": "not checked: it will be replaced"}')
    assert store.previous_manifest() is None
    store.write_manifest({"model": "m"})
    store.append(rollout_frame([("a", 0, None, "boom")]))
    assert store.previous_manifest() == store.read_manifest()


def test_missing_pairs(store: RolloutStore) -> None:
    assert store.missing_pairs(["a", "b"], 2) == 4
    store.append(rollout_frame([("a", 0, 1.0, None), ("a", 1, None, "x"), ("b", 0, 0.0, None)]))
    store.append(rollout_frame([("b", 1, 1.0, None), ("b", 2, 1.0, None), ("z", 0, 1.0, None)]))
    assert store.missing_pairs(["a", "b"], 2) == 1  # ("a", 1) failed
    store.append(rollout_frame([("a", 1, 1.0, None)]))
    assert store.missing_pairs(["a", "b", "a"], 2) == 0
    assert store.missing_pairs(pl.Series(["a", "b"]), 3) == 1
    assert store.missing_pairs([], 3) == 0


def test_clear_keeps_the_directory(store: RolloutStore) -> None:
    store.append(rollout_frame([("a", 0, 1.0, None)]))
    store.write_samples(pl.DataFrame({"sample_id": ["a"]}))
    with store.writer():
        store.clear()
        assert [p.name for p in store.run_dir.iterdir()] == [".lock"]
    assert store.run_dir.is_dir() and list(store.run_dir.iterdir()) == []


def test_resolving_repeats_matches_the_reference_rule(store: RolloutStore) -> None:
    """Scattered repeats (retried errors, exact repeats) across shards out of order:
    the same rows as sorting everything by (scored, shard) and keeping the last."""
    import random

    from curate.store.run_dir import prefer_latest_scored

    rng = random.Random(7)
    score = {(f"s{i:03d}", r): float(rng.random() < 0.5) for i in range(200) for r in range(6)}
    pairs = list(score)
    for k in range(8):
        rows = []
        for pair in rng.sample(pairs, 300):
            failed = rng.random() < 0.4
            rows.append((*pair, None if failed else score[pair], f"err{k}" if failed else None))
        store.append(rollout_frame(rows))
    frame = store.scan(["sample_id", "rollout_idx", "score", "error"]).collect()
    expected = prefer_latest_scored(frame).drop("_shard")
    got = store.rollouts(["sample_id", "rollout_idx", "score", "error"])
    assert got.rows() == expected.rows()
