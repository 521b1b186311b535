"""Fixtures for the CLI tests: inputs in their own directory, a subprocess helper."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.store.run_dir import RolloutStore
from tests.conftest import long_frame

# 12 samples x 4 rollouts: 4 high-variance, 3 always right, 3 always wrong, 1 partial-credit
# low-variance, 1 with a failed rollout. Row order is scrambled on purpose.
SCORES: dict[str, list[float | None]] = {
    "q01": [1, 0, 1, 0],
    "q02": [1, 0, 0, 0],
    "q03": [1, 1, 1, 0],
    "q04": [0, 1, None, 1],
    "q05": [1, 1, 1, 1],
    "q06": [1, 1, 1, 1],
    "q07": [1, 1, 1, 1],
    "q08": [0, 0, 0, 0],
    "q09": [0, 0, 0, 0],
    "q10": [0, 0, 0, 0],
    "q11": [0.5, 0.5, 0.5, 0.5],
    "q12": [0.2, 0.25, 0.2, 0.25],
}
HIGH_VARIANCE = ["q01", "q02", "q03", "q04"]


def score_frame() -> pl.DataFrame:
    frame = long_frame(SCORES)
    return pl.concat([frame[1::2], frame[::2]])  # not sorted: readers must not rely on order


def original_samples() -> pl.DataFrame:
    ids = list(SCORES)
    return pl.DataFrame(
        {
            "sample_id": ids,
            "question": [f"What is {i} + {i}?" for i in range(len(ids))],
            "answer": [str(2 * i) for i in range(len(ids))],
            "meta": [{"source": "unit", "level": i % 3} for i in range(len(ids))],
        }
    )


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A directory holding the input files (kept apart from where outputs go)."""
    d = tmp_path / "in"
    d.mkdir()
    return d


@pytest.fixture
def scores_csv(inputs: Path) -> Path:
    path = inputs / "scores.csv"
    score_frame().write_csv(path)
    return path


@pytest.fixture
def scores_parquet(inputs: Path) -> Path:
    path = inputs / "scores.parquet"
    score_frame().write_parquet(path)
    return path


@pytest.fixture
def samples_jsonl(inputs: Path) -> Path:
    path = inputs / "samples.jsonl"
    original_samples().write_ndjson(path)
    return path


@pytest.fixture
def run_dir(inputs: Path) -> Path:
    """A run directory as `curate eval` writes it, in two shards."""
    store = RolloutStore(inputs / "run")
    store.create()
    store.write_manifest({"model": "unit-test", "backend": "fake", "n_rollouts": 4})
    store.write_samples(original_samples())
    frame = score_frame()
    store.append(frame.head(20))
    store.append(frame.tail(frame.height - 20))
    return store.run_dir


@pytest.fixture(scope="session")
def run_curate() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `python -m curate ARGS...` as a real process."""

    def run(*args: object, env: dict[str, str] | None = None, cwd: Path | None = None):
        full_env = {
            k: v for k, v in os.environ.items() if k not in ("CURATE_DEBUG", "GITHUB_STEP_SUMMARY")
        }
        full_env.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "curate", *map(str, args)],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd,
            timeout=120,
        )

    return run


def listing(*dirs: Path) -> set[Path]:
    """Every file and directory under `dirs` (to check that nothing new appeared)."""
    return {p for d in dirs for p in d.rglob("*")}


@pytest.fixture
def snapshot() -> Callable[..., set[Path]]:
    return listing
