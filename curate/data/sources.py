"""Where evaluation data comes from: a table file, a Hugging Face dataset saved with
`save_to_disk`, or a directory of Parquet shards.

Saved Hugging Face datasets are read straight from their Arrow files (the layout
`save_to_disk` writes: `state.json` naming the shards, `dataset_dict.json` naming the
splits), so reading one does not need the `datasets` package.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from curate.errors import InputError, UsageError, one_line
from curate.store.tables import read_table

if TYPE_CHECKING:
    import polars as pl

SourceKind = Literal["table", "hf-dataset", "hf-dataset-dict", "parquet-dir"]

HF_STATE = "state.json"
HF_DICT = "dataset_dict.json"
_PARQUET_SUFFIXES = (".parquet", ".pq")


def source_kind(path: str | os.PathLike[str]) -> SourceKind:
    """What kind of data set `path` is (an InputError when it is none curate reads)."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or directory", path=path)
    if not path.is_dir():
        return "table"
    if (path / HF_DICT).is_file():
        return "hf-dataset-dict"
    if (path / HF_STATE).is_file():
        return "hf-dataset"
    if _parquet_shards(path):
        return "parquet-dir"
    raise InputError(
        "directory is neither a Hugging Face dataset saved with save_to_disk "
        f"(no {HF_STATE} or {HF_DICT}) nor a directory of Parquet shards",
        path=path,
    )


def hf_splits(path: str | os.PathLike[str]) -> list[str]:
    """The split names of a saved DatasetDict, in the order it lists them."""
    path = Path(path)
    try:
        data = json.loads((path / HF_DICT).read_text(encoding="utf-8"))
        splits = data["splits"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"unreadable {HF_DICT}: {exc}", path=path) from exc
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise InputError(f"{HF_DICT} has no list of splits", path=path)
    return splits


def source_files(path: str | os.PathLike[str], *, split: str | None = None) -> list[Path]:
    """The data files behind `path` (and `split`), in reading order."""
    path = Path(path)
    kind = source_kind(path)
    if kind == "table":
        if split is not None:
            raise UsageError(f"{path}: --split applies to a dataset directory, not a table file")
        return [path]
    if kind == "hf-dataset-dict":
        splits = hf_splits(path)
        if split is None:
            if len(splits) != 1:
                raise UsageError(
                    f"{path}: a dataset with splits {', '.join(splits)}; choose one with --split"
                )
            split = splits[0]
        if split not in splits:
            raise UsageError(f"{path}: no split '{split}' (have: {', '.join(splits)})")
        return _hf_arrow_files(path / split)
    if kind == "hf-dataset":
        if split is not None:
            raise UsageError(
                f"{path}: a single saved dataset has no splits; drop --split "
                f"(--split is for a DatasetDict)"
            )
        return _hf_arrow_files(path)
    shards = _parquet_shards(path)
    if split is None:
        return shards
    chosen = [p for p in shards if _shard_in_split(p.relative_to(path), split)]
    if not chosen:
        raise UsageError(
            f"{path}: no Parquet shard belongs to split '{split}' (looked for a '{split}/' "
            f"directory or files named '{split}-*' / '{split}.parquet')"
        )
    return chosen


def read_source(path: str | os.PathLike[str], *, split: str | None = None) -> pl.DataFrame:
    """All rows of the data set at `path` with their original fields."""
    import polars as pl

    path = Path(path)
    files = source_files(path, split=split)
    if source_kind(path) == "table":
        return read_table(path)
    frames = []
    for file in files:
        try:
            if file.suffix == ".arrow":
                # save_to_disk writes the Arrow IPC *stream* format.
                frames.append(pl.read_ipc_stream(file))
            else:
                frames.append(pl.read_parquet(file))
        except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
            first = one_line(exc)
            raise InputError(f"cannot read data shard: {first}", path=file) from exc
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"shards do not share one schema: {exc}", path=path) from exc


def source_sha256(path: str | os.PathLike[str], *, split: str | None = None) -> str:
    """SHA-256 over the data the run reads: a file's bytes, or a directory's data files
    (their names relative to it, then their bytes) for the chosen split."""
    path = Path(path)
    files = source_files(path, split=split)
    digest = hashlib.sha256()
    if path.is_dir():
        for file in files:
            # The name keeps two layouts of the same bytes apart; the split is in it.
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
            _update_with_file(digest, file)
    else:
        _update_with_file(digest, path)
    return digest.hexdigest()


def _update_with_file(digest: hashlib._Hash, file: Path) -> None:
    with open(file, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)


def _hf_arrow_files(directory: Path) -> list[Path]:
    state_path = directory / HF_STATE
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        names = [entry["filename"] for entry in state["_data_files"]]
    except FileNotFoundError:
        raise InputError(
            f"no {HF_STATE}: not a dataset saved with save_to_disk", path=directory
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"unreadable {HF_STATE}: {exc}", path=state_path) from exc
    files = [directory / name for name in names]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise InputError(f"missing data file(s) {', '.join(missing)}", path=directory)
    if not files:
        raise InputError("saved dataset has no data files", path=directory)
    return files


def _parquet_shards(directory: Path) -> list[Path]:
    """Parquet files under `directory` (recursively, hidden ones skipped), sorted by path."""
    shards = []
    for file in directory.rglob("*"):
        rel = file.relative_to(directory)
        if any(part.startswith((".", "_")) for part in rel.parts):
            continue  # temp files, _SUCCESS markers, .cache/
        if file.is_file() and file.suffix.lower() in _PARQUET_SUFFIXES:
            shards.append(file)
    return sorted(shards, key=lambda p: p.relative_to(directory).as_posix())


def _shard_in_split(rel: Path, split: str) -> bool:
    """Hub layouts: `SPLIT/...parquet`, `data/SPLIT-00000-of-00001.parquet`, `SPLIT.parquet`."""
    if split in rel.parts[:-1]:
        return True
    name = rel.name
    return name.startswith(f"{split}-") or rel.stem == split
