"""Atomic writes: a failed write leaves nothing under the final name (and no temp files)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from curate.errors import InputError
from curate.store.atomic import atomic_path, atomic_write_text
from curate.store.tables import read_table, write_table


class Boom(Exception):
    pass


def test_atomic_write_text(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    atomic_write_text(target, "héllo\n")
    assert target.read_text(encoding="utf-8") == "héllo\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    with pytest.raises(Boom), atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp != target
        tmp.write_bytes(b"half a parq")
        raise Boom
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(Boom), atomic_path(target) as tmp:
        tmp.write_text("new but incomplete")
        raise Boom
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_keyboard_interrupt_also_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.write_text("x")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="output directory does not exist"):
        atomic_write_text(tmp_path / "nope" / "out.txt", "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["t.parquet", "t.csv", "t.jsonl"])
def test_write_table_round_trip(tmp_path: Path, name: str) -> None:
    frame = pl.DataFrame({"sample_id": ["a", "b"], "score": [1.0, 0.5]})
    path = write_table(frame, tmp_path / name)
    assert read_table(path).equals(frame)
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("name", ["t.parquet", "t.csv", "t.jsonl"])
def test_write_table_failure_leaves_nothing(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: pl.DataFrame, file: object, *args: object, **kwargs: object) -> None:
        Path(str(file)).write_bytes(b"partial")
        raise Boom

    for method in ("write_parquet", "write_csv", "write_ndjson"):
        monkeypatch.setattr(pl.DataFrame, method, broken)
    with pytest.raises(Boom):
        write_table(pl.DataFrame({"a": [1]}), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_write_table_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"unknown table format '\.txt'"):
        write_table(pl.DataFrame({"a": [1]}), tmp_path / "t.txt")
    assert list(tmp_path.iterdir()) == []
