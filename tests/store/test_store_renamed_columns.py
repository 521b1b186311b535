"""Run directories and score tables written before a column rename still read, under today's
names: shards whose rollout index is `run_idx` (the name before `rollout_idx`), alone or mixed
with shards a resume wrote since."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from curate.store.run_dir import RolloutStore
from curate.store.schema import RENAMED_COLUMNS, current_names
from curate.store.scores import load_scores


def _rows(ids: list[str], idx: list[int], scores: list[float]) -> pl.DataFrame:
    return pl.DataFrame(
        {"sample_id": ids, "rollout_idx": idx, "score": scores, "error": [None] * len(ids)},
        schema_overrides={"rollout_idx": pl.Int32, "error": pl.String},
    )


def _age(store: RolloutStore) -> None:
    """Rewrite every shard as an earlier release wrote it (old column names)."""
    back = {new: old for old, new in RENAMED_COLUMNS.items()}
    for path in store.shard_paths():
        frame = pl.read_parquet(path)
        frame.rename({k: v for k, v in back.items() if k in frame.columns}).write_parquet(path)


def _run(tmp_path: Path, name: str) -> RolloutStore:
    store = RolloutStore(tmp_path / name)
    store.create()
    store.write_manifest({"model": "m"})
    store.write_samples(pl.DataFrame({"sample_id": ["a", "b"], "question": ["q1", "q2"]}))
    store.append(_rows(["a", "a", "b", "b"], [0, 1, 0, 1], [1.0, 0.0, 0.0, 0.0]))
    return store


def triples(frame: pl.DataFrame) -> list[tuple[str, int, float]]:
    rows = frame.sort("sample_id", "rollout_idx").select("sample_id", "rollout_idx", "score")
    return [tuple(r) for r in rows.iter_rows()]  # type: ignore[misc]


def test_only_an_old_name_without_its_new_one_is_renamed() -> None:
    assert current_names(["sample_id", "run_idx"]) == {"run_idx": "rollout_idx"}
    assert current_names(["run_idx", "rollout_idx"]) == {}  # both: today's column wins
    assert current_names(["sample_id", "score"]) == {}


def test_an_old_run_directory_reads_as_a_new_one(tmp_path: Path) -> None:
    new, old = _run(tmp_path, "new"), _run(tmp_path, "old")
    _age(old)
    assert "run_idx" in pl.read_parquet_schema(old.shard_paths()[0])
    assert triples(load_scores(old.run_dir).rollouts) == triples(load_scores(new.run_dir).rollouts)
    assert triples(old.rollouts()) == triples(new.rollouts())


def test_a_resume_mixes_old_and_new_shards(tmp_path: Path) -> None:
    store = _run(tmp_path, "run")
    _age(store)
    store.append(_rows(["a", "b"], [2, 2], [1.0, 1.0]))  # written today: rollout_idx
    got = triples(load_scores(store.run_dir).rollouts)
    assert got == [
        ("a", 0, 1.0),
        ("a", 1, 0.0),
        ("a", 2, 1.0),
        ("b", 0, 0.0),
        ("b", 1, 0.0),
        ("b", 2, 1.0),
    ]


def test_a_score_table_with_the_old_column_name(tmp_path: Path) -> None:
    for suffix in (".csv", ".jsonl", ".parquet"):
        path = tmp_path / f"scores{suffix}"
        frame = pl.DataFrame({"sample_id": ["a", "a"], "run_idx": [1, 0], "score": [0.0, 1.0]})
        {".csv": frame.write_csv, ".jsonl": frame.write_ndjson, ".parquet": frame.write_parquet}[
            suffix
        ](path)
        assert triples(load_scores(path).rollouts) == [("a", 0, 1.0), ("a", 1, 0.0)], suffix


def test_the_report_of_an_old_run_is_the_report_of_a_new_one(tmp_path: Path) -> None:
    new, old = _run(tmp_path, "new"), _run(tmp_path, "old")
    _age(old)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def report(store: RolloutStore) -> dict[str, object]:
        res = subprocess.run(
            [sys.executable, "-m", "curate", "report", str(store.run_dir), "--format", "json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        out = json.loads(res.stdout)
        out.pop("source", None)
        return out

    assert report(old) == report(new)
