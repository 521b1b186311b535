"""Reading rollout scores exactly: `load_scores`, and the side reads beside it.

The store reads and validates; it computes no statistic. `curate.stats` computes on
what the store returns, and `curate.analysis` composes the two (it imports both;
neither imports the other).

`load_scores(path)` reads every rollout row of any table format or run directory,
validated and de-duplicated; its errors name the problem. It is the reference: the
fast path (`curate.store.fast_scores.read_scores`) gives way to it on any input it
cannot prove valid in one scan, so every error and duplicate rule is this module's.
Used directly where the rows themselves are needed (grader agreement, plots, the
view), and by `read_scores(fast=False)` (`load_analysis(per_sample=True)`).

Beside it, reads of the other columns a report shows: lengths (`read_lengths`),
extracted answers (`read_answers`) and completions (`scan_completions`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from curate.core.deepen import descriptive_rows
from curate.errors import InputError, one_line
from curate.store.duplicates import pairs_distinct
from curate.store.manifest import RunManifest
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.store.schema import (
    REQUIRED_SCORE_COLUMNS,
    TOKEN_COLUMNS,
    rollout_file_schema,
    with_current_names,
)
from curate.store.tables import TABLE_SUFFIXES, read_table, scan_table, table_format

if TYPE_CHECKING:
    import polars as pl

# The columns analysis needs; optional extras are carried when present.
SCORE_COLUMNS = ("sample_id", "rollout_idx", "score", "error")
EXTRA_COLUMNS = (*TOKEN_COLUMNS, "truncated")


def input_errors() -> tuple[type[BaseException], ...]:
    """The errors input can cause. On these a fast read gives way to `load_scores`,
    which reads again and names the problem; a bug raises anything else, and surfaces."""
    import polars as pl

    return (pl.exceptions.PolarsError, OSError, ValueError, TypeError, OverflowError)


@dataclass(kw_only=True)
class ScoreOrigin:
    """Where scores came from: the path and, for a run directory, its store and manifest."""

    path: Path
    manifest: RunManifest | None = None
    store: RolloutStore | None = None
    _samples: pl.DataFrame | None = field(default=None, repr=False)
    _tokens: pl.DataFrame | None = field(default=None, repr=False)
    _tokens_read: bool = field(default=False, repr=False)

    @property
    def is_run_dir(self) -> bool:
        return self.store is not None

    def samples(self) -> pl.DataFrame | None:
        """The run's stored input samples (None for a bare score table)."""
        if self._samples is None and self.store is not None:
            self._samples = self.store.read_samples()
        return self._samples

    def tokens(self) -> pl.DataFrame | None:
        """The token columns of every stored row (a rollout that a resume replaced, or an
        exact repeat in a table, was paid for too); None when the input has none."""
        if not self._tokens_read:
            self._tokens = _stored_tokens(self.store) if self.store is not None else None
            self._tokens_read = True
        return self._tokens


@dataclass(kw_only=True)
class ScoreSource(ScoreOrigin):
    """Every rollout row, validated and de-duplicated, plus where they came from."""

    rollouts: pl.DataFrame


def load_scores(path: str | os.PathLike[str], *, deepening: bool = False) -> ScoreSource:
    """Read and validate scores; bad input raises InputError naming the file.

    A deepened run's deepening rows (`curate.core.deepen`) are left out, so that every
    per-sample figure reads the first N rollouts of every prompt; `deepening=True`
    keeps them (for the pass-rate prior, the one reader of every rollout)."""
    import polars as pl

    path = Path(path)
    if not path.exists():
        # A name without a table suffix was meant as a run directory (a typo in runs/...):
        # say so rather than complain about its (missing) format.
        known = path.suffix.lower() in TABLE_SUFFIXES
        raise InputError(
            "no such file or directory" if known else "no such file or run directory", path=path
        )
    if path.is_dir():
        if not is_run_dir(path):
            raise InputError(
                "not a run directory (no manifest.json or rollouts/) and not a table file",
                path=path,
            )
        store = RolloutStore(path)
        manifest = store.manifest_if_any()
        present = shard_columns(store)
        cols = [*SCORE_COLUMNS, *(c for c in EXTRA_COLUMNS if c in present)]
        frame = store.rollouts(cols)
        if frame.height == 0:
            raise InputError("run directory has no rollouts yet", path=path)
        first_n = None if deepening else descriptive_rows(manifest)
        if first_n is not None:
            frame = frame.filter(first_n)
        if excludes_truncated(manifest) and "truncated" in frame.columns:
            frame = frame.filter(kept_rows())
            if frame.height == 0:
                raise InputError(
                    "every rollout is cut short and the run excludes them (--truncated exclude)",
                    path=path,
                )
        frame = _validate(frame, path)
        return ScoreSource(path=path, rollouts=frame, manifest=manifest, store=store)

    table_format(path)  # unknown suffix -> InputError before reading
    try:
        # A .json file may hold one JSON array, which only the eager reader understands.
        lf = score_table(path, json_array=path.suffix.lower() == ".json")
        names = lf.collect_schema().names()
    except InputError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read table: {one_line(exc)}", path=path) from exc
    missing = [c for c in REQUIRED_SCORE_COLUMNS if c not in names]
    if missing:
        raise InputError(
            f"missing required column(s) {', '.join(missing)} (have: {', '.join(names) or 'none'})",
            path=path,
        )
    keep = [c for c in (*SCORE_COLUMNS, *EXTRA_COLUMNS) if c in names]
    try:
        frame = lf.select(keep).collect()
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read table: {one_line(exc)}", path=path) from exc
    # Taken before de-duplication: every row was paid for.
    tokens = table_tokens(frame)
    frame = _normalise(frame, path)
    frame = _validate(frame, path)
    frame = _resolve_duplicates(frame, path)
    return ScoreSource(path=path, rollouts=frame, _tokens=tokens, _tokens_read=True)


def excludes_truncated(manifest: RunManifest | None) -> bool:
    """Whether the run leaves its cut-short rollouts out of the statistics (they stay
    stored): `--truncated exclude`; a score table (no manifest) keeps every row."""
    return manifest is not None and manifest.excludes_truncated


def kept_rows() -> pl.Expr:
    """Rows an `exclude` run counts: not cut short."""
    import polars as pl

    return ~pl.col("truncated").fill_null(False)


def is_json(path: Path) -> bool:
    """A .json file may hold one JSON array, which only the eager reader understands."""
    return path.suffix.lower() == ".json"


def score_table(path: Path, *, json_array: bool) -> pl.LazyFrame:
    """A score table given by a user, lazily, under today's column names (a .json file may hold
    one JSON array, which only the eager reader understands)."""
    lf = read_table(path).lazy() if json_array else scan_table(path)
    return with_current_names(lf)


def table_tokens(frame: pl.DataFrame) -> pl.DataFrame | None:
    """A table's token columns as integers (a value that is not one counts as missing)."""
    import polars as pl

    cols = [c for c in TOKEN_COLUMNS if c in frame.columns]
    if not cols:
        return None
    try:
        return frame.select(pl.col(c).cast(pl.Int64, strict=False) for c in cols)
    except input_errors():  # usage is optional: the scores decide whether a read works
        return None


def _stored_tokens(store: RolloutStore) -> pl.DataFrame | None:
    """The token columns of every row of every shard, when the shards have both."""

    try:
        shards = store.shard_paths()
        if not shards or not set(TOKEN_COLUMNS) <= set(rollout_file_schema(shards[0])):
            return None
        return store.scan(list(TOKEN_COLUMNS)).drop("_shard").collect()
    except input_errors():  # usage is optional: the scores decide whether a read works
        return None


def shard_columns(store: RolloutStore) -> set[str]:

    shards = store.shard_paths()
    if not shards:
        return set()
    return set(rollout_file_schema(shards[0]))


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
        bad = frame.filter(
            parsed.is_null() & as_text.is_not_null() & (as_text.str.strip_chars() != "")
        )
        if bad.height:
            raise InputError(
                f"score is not numeric (sample {bad['sample_id'][0]!r}: {bad['score'][0]!r})",
                path=path,
            )
        frame = frame.with_columns(parsed.alias("score"))
    if "rollout_idx" in frame.columns:
        rollout_idx = frame["rollout_idx"]
        if not rollout_idx.dtype.is_integer():
            cast = rollout_idx.cast(pl.Int64, strict=False)
            if cast.null_count() > rollout_idx.null_count():
                raise InputError("rollout_idx is not an integer column", path=path)
        if frame["rollout_idx"].null_count():
            raise InputError("rollout_idx has missing values", path=path)
        frame = frame.with_columns(pl.col("rollout_idx").cast(pl.Int32))
    else:
        # No run index: number each sample's rows in file order.
        frame = frame.with_columns(
            pl.int_range(pl.len()).over("sample_id").cast(pl.Int32).alias("rollout_idx")
        )
    return frame.select(
        "sample_id",
        "rollout_idx",
        "score",
        "error",
        *(c for c in EXTRA_COLUMNS if c in frame.columns),
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
    """Drop exact repeats of a (sample_id, rollout_idx) row; refuse conflicting ones."""
    import polars as pl

    sid, rid = pl.col("sample_id"), pl.col("rollout_idx")
    # Fast path: sorted by (sample_id, rollout_idx) with strictly rising rollout_idx means
    # no repeats, checked in one linear pass instead of a hash over all pairs.
    prev_sid = sid.shift(1)
    clean = frame.select(
        (prev_sid.is_null() | (sid > prev_sid) | ((sid == prev_sid) & (rid > rid.shift(1)))).all()
    ).item()
    if clean or pairs_distinct(frame):
        return frame
    dup = pl.struct("sample_id", "rollout_idx").is_duplicated()
    repeated = frame.filter(dup)
    if repeated.height == 0:
        return frame
    conflicts = (
        repeated.group_by("sample_id", "rollout_idx")
        .agg(pl.struct("score", "error").n_unique().alias("versions"))
        .filter(pl.col("versions") > 1)
        .sort("sample_id", "rollout_idx")
    )
    if conflicts.height:
        row = conflicts.row(0, named=True)
        raise InputError(
            f"conflicting rows for sample {row['sample_id']!r} run {row['rollout_idx']} "
            f"({conflicts.height} conflicting pair(s))",
            path=path,
        )
    return frame.unique(subset=["sample_id", "rollout_idx"], keep="first", maintain_order=True)


# ------------------------------------------------ lengths (the report's truncation section)

LENGTH_COLUMNS = ("sample_id", "score", "error", "truncated", "completion_tokens")


def length_rows(frame: pl.DataFrame, score: str) -> pl.DataFrame | None:
    """LENGTH_COLUMNS out of rows already read (`score`: the column holding the score as
    read); None without completion token counts."""
    import polars as pl

    if "completion_tokens" not in frame.columns:
        return None
    try:
        return frame.select(
            pl.col("sample_id").cast(pl.String),
            pl.when(pl.col("error").is_null()).then(pl.col(score)).alias("score"),
            pl.col("error"),
            (
                pl.col("truncated").cast(pl.Boolean, strict=False)
                if "truncated" in frame.columns
                else pl.lit(None, dtype=pl.Boolean).alias("truncated")
            ),
            pl.col("completion_tokens").cast(pl.Int64, strict=False),
        )
    except input_errors():  # optional section: the scores decide whether a read works
        return None


def read_lengths(path: str | os.PathLike[str]) -> pl.DataFrame | None:
    """LENGTH_COLUMNS of every rollout (de-duplicated as the store reads them; a table's
    rows as they are, without `truncated` read as not cut short), or None when the input
    has no `completion_tokens`. Cut-short rollouts are included whatever the run's
    truncation policy: this is where they are counted. No text column is read."""
    import polars as pl

    path = Path(path)
    try:
        if path.is_dir():
            if not is_run_dir(path):
                return None
            store = RolloutStore(path)
            have = shard_columns(store)
            if "completion_tokens" not in have:
                return None
            cols = [c for c in LENGTH_COLUMNS if c in have]
            first_n = descriptive_rows(store.manifest_if_any())
            frame = store.rollouts(cols if first_n is None else [*cols, "rollout_idx"])
            if first_n is not None:  # a deepened run: its first N rollouts, as the scores
                frame = frame.filter(first_n)
        else:
            if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
                return None
            lf = score_table(path, json_array=is_json(path))
            names = lf.collect_schema().names()
            if "completion_tokens" not in names or "sample_id" not in names or "score" not in names:
                return None
            frame = lf.select(c for c in LENGTH_COLUMNS if c in names).collect()
        missing = [c for c in LENGTH_COLUMNS if c not in frame.columns]
        frame = frame.with_columns(
            *(
                pl.lit(None, dtype=pl.String if c == "error" else pl.Boolean).alias(c)
                for c in missing
            )
        )
        return frame.select(
            pl.col("sample_id").cast(pl.String),
            pl.col("score").cast(pl.Float64, strict=False),
            pl.col("error").cast(pl.String),
            pl.col("truncated").cast(pl.Boolean, strict=False),
            pl.col("completion_tokens").cast(pl.Int64, strict=False),
        )
    except input_errors():  # optional section: the scores' own read names real problems
        return None


# ------------------------------------------------ extracted answers (suspect labels)

# The column holding what the grader extracted from each completion.
ANSWER_COLUMN = "extracted"


def has_answers(path: str | os.PathLike[str]) -> bool:
    """Whether the input stores extracted answers: a run directory whose shards have an
    `extracted` column, or a table with one. Reads schemas only (and a JSON array file).
    """
    path = Path(path)
    # Unreadable input: the scores' own read names the problem, not this probe.
    unreadable: tuple[type[BaseException], ...] = (InputError, *input_errors())
    try:
        if path.is_dir():
            return is_run_dir(path) and ANSWER_COLUMN in shard_columns(RolloutStore(path))
        if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
            return False
        lf = score_table(path, json_array=is_json(path))
        return ANSWER_COLUMN in lf.collect_schema().names()
    except unreadable:
        return False


def read_answers(path: str | os.PathLike[str]) -> pl.DataFrame | None:
    """sample_id, score, error, extracted (String) of every rollout, validated and
    de-duplicated exactly as `load_scores` reads the scores; None when the input has no
    `extracted` column (a bare score table usually has none).

    A second read beside `read_scores`, on purpose: the answers are strings, several
    times the bytes of the scores, and only the suspect-label check needs them.
    """
    import polars as pl

    path = Path(path)
    if not has_answers(path):
        return None
    cols = ["sample_id", "score", "error", ANSWER_COLUMN]
    if path.is_dir():
        store = RolloutStore(path)
        manifest = store.manifest_if_any()
        exclude = excludes_truncated(manifest) and "truncated" in shard_columns(store)
        frame = store.rollouts([*SCORE_COLUMNS, ANSWER_COLUMN, *(["truncated"] if exclude else [])])
        if exclude:
            frame = frame.filter(kept_rows())
        first_n = descriptive_rows(manifest)
        if first_n is not None:
            frame = frame.filter(first_n)
        if frame.height == 0:
            raise InputError("run directory has no rollouts yet", path=path)
        return _validate(frame, path).select(cols)
    lf = score_table(path, json_array=is_json(path))
    names = lf.collect_schema().names()
    try:
        frame = lf.select(c for c in (*SCORE_COLUMNS, ANSWER_COLUMN) if c in names).collect()
        answers = frame[ANSWER_COLUMN].cast(pl.String)
    except input_errors() as exc:
        raise InputError(f"cannot read table: {one_line(exc)}", path=path) from exc
    # `_normalise` keeps the row order, so the answers line up with its rows.
    frame = _normalise(frame.drop(ANSWER_COLUMN), path).with_columns(answers)
    frame = _resolve_duplicates(_validate(frame, path), path)
    return frame.select(cols)


COMPLETION_COLUMN = "completion"


def scan_completions(path: str | os.PathLike[str], *, text: bool = True) -> pl.LazyFrame | None:
    """sample_id, rollout_idx (null for a table without one), error, completion_tokens (null
    when not counted) and completion of every stored row, lazily; None when the input
    stores no completion. Shards are not de-duplicated: a repeated pair is an error row
    a resume replaced (no completion) or an exact repeat, which a count over scored
    completions can ignore; the texts are the costliest column, so callers filter and
    aggregate before collecting, and `text=False` leaves the column out (a run's shards
    are then not asked for it)."""
    import polars as pl

    path = Path(path)
    unreadable: tuple[type[BaseException], ...] = (InputError, *input_errors())
    try:
        if path.is_dir():
            if not is_run_dir(path):
                return None
            store = RolloutStore(path)
            have = shard_columns(store) if store.shard_paths() else set()
            if COMPLETION_COLUMN not in have:
                return None
            cols = ["sample_id", "rollout_idx", "error", *([COMPLETION_COLUMN] if text else [])]
            tokens = "completion_tokens" in have
            lf = store.scan(cols + (["completion_tokens"] if tokens else [])).drop("_shard")
            first_n = descriptive_rows(store.manifest_if_any())
            if first_n is not None:  # a deepened run: its first N rollouts, as the scores
                lf = lf.filter(first_n)
        else:
            if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
                return None
            lf = score_table(path, json_array=is_json(path))
            names = lf.collect_schema().names()
            if COMPLETION_COLUMN not in names or "sample_id" not in names:
                return None
            tokens = "completion_tokens" in names
            lf = lf.select(
                "sample_id",
                pl.col("rollout_idx")
                if "rollout_idx" in names
                else pl.lit(None).alias("rollout_idx"),
                pl.col("error") if "error" in names else pl.lit(None).alias("error"),
                COMPLETION_COLUMN,
                *(["completion_tokens"] if tokens else []),
            )
    except unreadable:
        return None  # the scores' own read names the problem
    return lf.select(
        pl.col("sample_id").cast(pl.String),
        pl.col("rollout_idx").cast(pl.Int64),
        pl.col("error").cast(pl.String),
        (pl.col("completion_tokens") if tokens else pl.lit(None))
        .cast(pl.Int64)
        .alias("completion_tokens"),
        *([pl.col(COMPLETION_COLUMN).cast(pl.String)] if text else []),
    )
