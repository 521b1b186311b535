"""The run directory: manifest, samples, append-only shards, de-duplicating reads."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from curate.errors import InputError
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.store.schema import FORMAT_VERSION, ROLLOUT_COLUMNS
from tests.conftest import rollout_frame


def as_dict(frame: pl.DataFrame) -> dict[tuple[str, int], tuple[float | None, str | None]]:
    return {
        (r["sample_id"], r["rollout_idx"]): (r["score"], r["error"])
        for r in frame.iter_rows(named=True)
    }


def test_is_run_dir(tmp_path: Path) -> None:
    assert not is_run_dir(tmp_path)
    assert not is_run_dir(tmp_path / "missing")
    (tmp_path / "file.csv").write_text("x")
    assert not is_run_dir(tmp_path / "file.csv")
    (tmp_path / "rollouts").mkdir()
    assert is_run_dir(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text("{}")
    assert is_run_dir(other)


def test_manifest_round_trip(store: RolloutStore) -> None:
    manifest = {
        "model": "Qwen/Qwen2.5-0.5B-Instruct",
        "sampling": {"temperature": 1.0, "n": 8},
        "grader": "exact",
        "dataset_fingerprint": "sha256:abc",
        "started": "2025-01-01T00:00:00Z",
        "tags": ["a", "b"],
    }
    store.write_manifest(manifest)
    assert store.exists()
    assert store.read_manifest() == {"format_version": FORMAT_VERSION, **manifest}
    # Stable, human-readable file: sorted keys, trailing newline.
    text = store.manifest_path.read_text()
    assert text.endswith("\n")
    assert json.loads(text) == store.read_manifest()
    assert list(json.loads(text)) == sorted(json.loads(text))
    assert [p.name for p in store.run_dir.iterdir() if p.name.startswith(".")] == []


def test_manifest_rewrite_replaces(store: RolloutStore) -> None:
    store.write_manifest({"model": "a", "finished": None})
    store.write_manifest({"model": "b"})
    assert store.read_manifest() == {"format_version": FORMAT_VERSION, "model": "b"}


def test_manifest_errors(tmp_path: Path) -> None:
    s = RolloutStore(tmp_path)
    with pytest.raises(InputError, match=r"no manifest\.json"):
        s.read_manifest()
    s.manifest_path.write_text("{not json")
    with pytest.raises(InputError, match="manifest is not valid JSON") as info:
        s.read_manifest()
    assert str(s.manifest_path) in str(info.value)
    s.manifest_path.write_text("[1, 2]")
    with pytest.raises(InputError, match="not a JSON object"):
        s.read_manifest()


def test_samples_round_trip(store: RolloutStore) -> None:
    assert store.read_samples() is None
    samples = pl.DataFrame(
        {"sample_id": ["a", "b"], "question": ["1+1?", "2+2?"], "answer": ["2", "4"]}
    )
    store.write_samples(samples)
    assert store.read_samples().equals(samples)


def test_append_and_read(store: RolloutStore) -> None:
    path = store.append(
        rollout_frame([("a", 1, 0.0, None), ("a", 0, 1.0, None), ("b", 0, None, "boom")])
    )
    assert path is not None and path.parent == store.rollouts_dir
    assert path.name.startswith("part-") and path.suffix == ".parquet"
    assert store.shard_paths() == [path]
    frame = store.rollouts()
    assert frame.columns == list(ROLLOUT_COLUMNS)
    assert frame.schema["rollout_idx"] == pl.Int32
    assert frame.schema["score"] == pl.Float64
    assert frame.select("sample_id", "rollout_idx").rows() == [("a", 0), ("a", 1), ("b", 0)]
    assert frame["completion"].null_count() == 3  # columns not given are null
    assert store.completed_pairs().sort("sample_id", "rollout_idx").rows() == [("a", 0), ("a", 1)]


def test_append_accepts_extra_known_columns(store: RolloutStore) -> None:
    frame = rollout_frame([("a", 0, 1.0, None)]).with_columns(
        pl.lit("the answer is 2").alias("completion"), pl.lit(12).alias("completion_tokens")
    )
    store.append(frame)
    out = store.rollouts(["sample_id", "rollout_idx", "completion", "completion_tokens"])
    assert out["completion"].to_list() == ["the answer is 2"]
    assert out["completion_tokens"].dtype == pl.Int32


def test_append_rejects_unknown_columns_and_skips_empty(store: RolloutStore) -> None:
    with pytest.raises(ValueError, match="unknown rollout columns"):
        store.append(rollout_frame([("a", 0, 1.0, None)]).with_columns(pl.lit(1).alias("api_key")))
    assert store.append(rollout_frame([])) is None
    assert store.shard_paths() == []


def test_shards_accumulate_in_write_order(store: RolloutStore) -> None:
    paths = [store.append(rollout_frame([("a", i, 1.0, None)])) for i in range(5)]
    assert store.shard_paths() == paths
    assert store.rollouts()["rollout_idx"].sort().to_list() == [0, 1, 2, 3, 4]
    # Only finished shards in rollouts/, no temporary files.
    assert sorted(store.rollouts_dir.iterdir()) == paths


def test_dedup_scored_beats_error_and_later_beats_earlier(store: RolloutStore) -> None:
    store.append(
        rollout_frame(
            [
                ("a", 0, None, "timeout"),  # later shard scores it: score wins
                ("a", 1, 1.0, None),  # later shard errors on it: the score still wins
                ("a", 2, 1.0, None),  # later shard scores it the same: an exact repeat
                ("a", 3, None, "first error"),  # two errors: later wins
                ("b", 0, 1.0, None),  # only here
            ]
        )
    )
    store.append(
        rollout_frame(
            [
                ("a", 0, 1.0, None),
                ("a", 1, None, "rate limited"),
                ("a", 2, 1.0, None),
                ("a", 3, None, "second error"),
                ("c", 0, 0.0, None),  # only here
            ]
        )
    )
    got = as_dict(store.rollouts())
    assert got == {
        ("a", 0): (1.0, None),
        ("a", 1): (1.0, None),
        ("a", 2): (1.0, None),
        ("a", 3): (None, "second error"),
        ("b", 0): (1.0, None),
        ("c", 0): (0.0, None),
    }
    assert store.completed_pairs().height == 5


def test_dedup_within_a_single_shard_prefers_scored(store: RolloutStore) -> None:
    store.append(rollout_frame([("a", 0, None, "timeout"), ("a", 0, 1.0, None)]))
    assert as_dict(store.rollouts()) == {("a", 0): (1.0, None)}


def test_corrupt_shard_is_an_input_error(store: RolloutStore) -> None:
    store.append(rollout_frame([("a", 0, 1.0, None)]))
    bad = store.rollouts_dir / "part-99999999999999999999-1-000000.parquet"
    bad.write_bytes(b"garbage")
    with pytest.raises(InputError, match="cannot read rollout shard") as info:
        store.rollouts()
    assert str(info.value).startswith(f"{bad}: ")  # the file itself, not the directory
    assert "--set-aside-corrupt" in str(info.value)
    assert "\n" not in str(info.value)


def test_empty_store(tmp_path: Path) -> None:
    s = RolloutStore(tmp_path / "r")
    assert s.shard_paths() == []
    assert s.rollouts().height == 0
