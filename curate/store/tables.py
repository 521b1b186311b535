"""Reading and writing tables: every Parquet, CSV and JSONL file curate touches goes here."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from curate.errors import InputError, one_line
from curate.store.atomic import atomic_path

if TYPE_CHECKING:
    import polars as pl

TableFormat = Literal["parquet", "csv", "jsonl"]

TABLE_SUFFIXES: dict[str, TableFormat] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}


def table_format(path: str | os.PathLike[str]) -> TableFormat:
    """The table format named by a file's suffix, or an InputError."""
    suffix = Path(path).suffix.lower()
    try:
        return TABLE_SUFFIXES[suffix]
    except KeyError:
        raise InputError(
            f"unknown table format '{suffix or '(none)'}' (use .parquet, .csv or .jsonl)",
            path=path,
        ) from None


def scan_table(path: str | os.PathLike[str], columns: list[str] | None = None) -> pl.LazyFrame:
    """A lazy frame over a Parquet, CSV or JSONL file (errors surface on collect)."""
    import polars as pl

    path = Path(path)
    if not path.exists():
        raise InputError("no such file", path=path)
    if path.is_dir():
        raise InputError("is a directory, not a table file", path=path)
    fmt = table_format(path)
    if fmt == "parquet":
        lf = pl.scan_parquet(path)
    elif fmt == "csv":
        lf = pl.scan_csv(path, infer_schema_length=10_000)
    else:
        source = _jsonl_source(path)
        if isinstance(source, Path):
            lf = pl.scan_ndjson(source, infer_schema_length=10_000)
        else:
            lf = pl.read_ndjson(source, infer_schema_length=10_000).lazy()
    if columns is not None:
        lf = lf.select(columns)
    return lf


# A UTF-8 byte-order mark: legal at the start of a JSON text (RFC 8259 lets a parser
# ignore it), written by some Windows editors and exporters; polars refuses it.
UTF8_BOM = b"\xef\xbb\xbf"


def _jsonl_source(path: Path) -> Path | io.BytesIO:
    """What polars reads for a JSON Lines file: the path, or its bytes without a
    byte-order mark. An empty file (nothing but white space) is an InputError."""
    with path.open("rb") as f:
        head = f.read(4096)
        if head.strip() == b"" and f.read(1) == b"":
            raise InputError("is empty: no JSON lines to read", path=path)
    if not head.startswith(UTF8_BOM):
        return path
    body = path.read_bytes()[len(UTF8_BOM) :]
    if not body.strip():
        raise InputError("is empty: no JSON lines to read", path=path)
    return io.BytesIO(body)


def read_table(path: str | os.PathLike[str]) -> pl.DataFrame:
    """Read a whole table eagerly; malformed files become one-line InputErrors."""
    import polars as pl

    path = Path(path)
    if not path.exists():  # before the suffix: a typo is missing, not of unknown format
        raise InputError("no such file", path=path)
    fmt = table_format(path)
    try:
        if fmt == "jsonl" and path.suffix.lower() == ".json":
            return _read_json_any(path)
        return scan_table(path).collect()
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read {fmt} table: {one_line(exc)}", path=path) from exc


def _read_json_any(path: Path) -> pl.DataFrame:
    """A .json file may be JSON Lines or one JSON array of records."""
    import polars as pl

    text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is dropped
    if text.lstrip().startswith("["):
        records = json.loads(text)
        if not records:
            raise InputError("is empty: a JSON array without records", path=path)
        return pl.DataFrame(records, infer_schema_length=None)
    return pl.read_ndjson(_jsonl_source(path))


def write_table(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write `frame` atomically in the format named by the suffix."""
    path = Path(path)
    fmt = table_format(path)
    with atomic_path(path) as tmp:
        if fmt == "parquet":
            frame.write_parquet(tmp)
        elif fmt == "csv":
            frame.write_csv(tmp)
        else:
            frame.write_ndjson(tmp)
    return path
