"""Load rollout scores for analysis: from a run directory or any long-format table."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.errors import InputError
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.store.schema import REQUIRED_SCORE_COLUMNS
from curate.store.tables import read_table, scan_table, table_format

if TYPE_CHECKING:
    import polars as pl

# The columns analysis needs; optional extras are carried when present.
SCORE_COLUMNS = ("sample_id", "run_idx", "score", "error")
_EXTRA_COLUMNS = ("prompt_tokens", "completion_tokens", "truncated")


@dataclass
class ScoreSource:
    """Scores ready for the statistics, plus where they came from."""

    path: Path
    rollouts: pl.DataFrame
    manifest: dict[str, Any] | None = None
    store: RolloutStore | None = None
    _samples: pl.DataFrame | None = field(default=None, repr=False)

    @property
    def is_run_dir(self) -> bool:
        return self.store is not None

    def samples(self) -> pl.DataFrame | None:
        """The run's stored input samples (None for a bare score table)."""
        if self._samples is None and self.store is not None:
            self._samples = self.store.read_samples()
        return self._samples


def load_scores(path: str | os.PathLike[str]) -> ScoreSource:
    """Read and validate scores; bad input raises InputError naming the file."""
    import polars as pl

    path = Path(path)
    if not path.exists():
        raise InputError("no such file or directory", path=path)
    if path.is_dir():
        if not is_run_dir(path):
            raise InputError(
                "not a run directory (no manifest.json or rollouts/) and not a table file",
                path=path,
            )
        store = RolloutStore(path)
        manifest = store.read_manifest() if store.exists() else None
        present = _shard_columns(store)
        cols = [*SCORE_COLUMNS, *(c for c in _EXTRA_COLUMNS if c in present)]
        frame = store.rollouts(cols)
        if frame.height == 0:
            raise InputError("run directory has no rollouts yet", path=path)
        frame = _validate(frame, path)
        return ScoreSource(path=path, rollouts=frame, manifest=manifest, store=store)

    table_format(path)  # unknown suffix -> InputError before reading
    try:
        lf = scan_table(path)
        names = lf.collect_schema().names()
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read table: {_first_line(exc)}", path=path) from exc
    missing = [c for c in REQUIRED_SCORE_COLUMNS if c not in names]
    if missing:
        raise InputError(
            f"missing required column(s) {', '.join(missing)} (have: {', '.join(names) or 'none'})",
            path=path,
        )
    keep = [c for c in (*SCORE_COLUMNS, *_EXTRA_COLUMNS) if c in names]
    try:
        frame = lf.select(keep).collect()
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        if path.suffix.lower() == ".json":
            frame = read_table(path).select(keep)
        else:
            raise InputError(f"cannot read table: {_first_line(exc)}", path=path) from exc
    frame = _normalise(frame, path)
    frame = _validate(frame, path)
    frame = _resolve_duplicates(frame, path)
    return ScoreSource(path=path, rollouts=frame)


def _shard_columns(store: RolloutStore) -> set[str]:
    import polars as pl

    shards = store.shard_paths()
    if not shards:
        return set()
    return set(pl.read_parquet_schema(shards[0]))


def _normalise(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    """Cast to the canonical dtypes; a bad value is named in the error."""
    import polars as pl

    if frame.height == 0:
        raise InputError("table is empty", path=path)
    if "error" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("error"))
    frame = frame.with_columns(
        pl.col("error").cast(pl.String).replace("", None),
        pl.col("sample_id").cast(pl.String),
    )
    if frame["sample_id"].null_count():
        raise InputError("sample_id has missing values", path=path)
    score = frame["score"]
    if score.dtype == pl.Boolean or score.dtype.is_numeric():
        frame = frame.with_columns(pl.col("score").cast(pl.Float64))
    else:
        as_text = score.cast(pl.String)
        parsed = as_text.str.strip_chars().cast(pl.Float64, strict=False)
        bad = frame.filter(parsed.is_null() & as_text.is_not_null() & (as_text.str.strip_chars() != ""))
        if bad.height:
            raise InputError(
                f"score is not numeric (sample {bad['sample_id'][0]!r}: {bad['score'][0]!r})",
                path=path,
            )
        frame = frame.with_columns(parsed.alias("score"))
    if "run_idx" in frame.columns:
        run_idx = frame["run_idx"]
        if not run_idx.dtype.is_integer():
            cast = run_idx.cast(pl.Int64, strict=False)
            if cast.null_count() > run_idx.null_count():
                raise InputError("run_idx is not an integer column", path=path)
        if frame["run_idx"].null_count():
            raise InputError("run_idx has missing values", path=path)
        frame = frame.with_columns(pl.col("run_idx").cast(pl.Int32))
    else:
        # No run index: number each sample's rows in file order.
        frame = frame.with_columns(pl.int_range(pl.len()).over("sample_id").cast(pl.Int32).alias("run_idx"))
    return frame.select(
        "sample_id", "run_idx", "score", "error", *(c for c in _EXTRA_COLUMNS if c in frame.columns)
    )


def _validate(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    import polars as pl

    score, error = pl.col("score"), pl.col("error")
    checks = frame.select(
        score.is_nan().any().alias("nan"),
        ((score < 0) | (score > 1)).any().alias("range"),
        (score.is_null() & error.is_null()).any().alias("empty"),
    ).row(0, named=True)
    if checks["nan"]:
        sid = frame.filter(score.is_nan())["sample_id"][0]
        raise InputError(f"score is NaN (sample {sid!r})", path=path)
    if checks["range"]:
        row = frame.filter((score < 0) | (score > 1)).row(0, named=True)
        raise InputError(
            f"score {row['score']} is outside [0, 1] (sample {row['sample_id']!r})", path=path
        )
    if checks["empty"]:
        sid = frame.filter(score.is_null() & error.is_null())["sample_id"][0]
        raise InputError(f"row with neither a score nor an error (sample {sid!r})", path=path)
    # An error row carries no score, whatever the file says.
    return frame.with_columns(pl.when(error.is_null()).then(score).otherwise(None).alias("score"))


def _resolve_duplicates(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    """Drop exact repeats of a (sample_id, run_idx) row; refuse conflicting ones."""
    import polars as pl

    sid, rid = pl.col("sample_id"), pl.col("run_idx")
    # Fast path: sorted by (sample_id, run_idx) with strictly rising run_idx means
    # no repeats, checked in one linear pass instead of a hash over all pairs.
    prev_sid = sid.shift(1)
    clean = frame.select(
        (prev_sid.is_null() | (sid > prev_sid) | ((sid == prev_sid) & (rid > rid.shift(1)))).all()
    ).item()
    if clean:
        return frame
    dup = pl.struct("sample_id", "run_idx").is_duplicated()
    repeated = frame.filter(dup)
    if repeated.height == 0:
        return frame
    conflicts = (
        repeated.group_by("sample_id", "run_idx")
        .agg(pl.struct("score", "error").n_unique().alias("versions"))
        .filter(pl.col("versions") > 1)
        .sort("sample_id", "run_idx")
    )
    if conflicts.height:
        row = conflicts.row(0, named=True)
        raise InputError(
            f"conflicting rows for sample {row['sample_id']!r} run {row['run_idx']} "
            f"({conflicts.height} conflicting pair(s))",
            path=path,
        )
    return frame.unique(subset=["sample_id", "run_idx"], keep="first", maintain_order=True)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__
