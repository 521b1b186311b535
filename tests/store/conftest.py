"""Helpers for the store tests: write score tables in every format, build run directories."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.store.run_dir import RolloutStore


def write_frame(frame: pl.DataFrame, path: Path) -> Path:
    """Write `frame` with polars directly (not through curate) in the format of the suffix."""
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        frame.write_parquet(path)
    elif suffix == ".csv":
        frame.write_csv(path)
    elif suffix in (".jsonl", ".ndjson"):
        frame.write_ndjson(path)
    elif suffix == ".json":  # one JSON array of records
        path.write_text(json.dumps(frame.to_dicts()), encoding="utf-8")
    else:
        raise ValueError(suffix)
    return path


@pytest.fixture
def table_file(tmp_path: Path) -> Callable[..., Path]:
    """Factory: `table_file("scores.csv", {"sample_id": [...], "score": [...]})` -> path."""

    def make(name: str, data: dict[str, list[Any]] | pl.DataFrame) -> Path:
        frame = data if isinstance(data, pl.DataFrame) else pl.DataFrame(data, strict=False)
        return write_frame(frame, tmp_path / name)

    return make


@pytest.fixture
def text_file(tmp_path: Path) -> Callable[[str, str], Path]:
    """Factory: `text_file("scores.csv", "sample_id,score\\n...")` -> path."""

    def make(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return make


@pytest.fixture
def store(tmp_path: Path) -> RolloutStore:
    """An empty run directory with a manifest."""
    s = RolloutStore(tmp_path / "run")
    s.create()
    s.write_manifest({"model": "test-model", "backend": "fake"})
    return s
