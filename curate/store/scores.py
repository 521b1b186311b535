"""Reading rollout scores for analysis, from a run directory or any long-format table.

The store reads and validates; it computes no statistic. `curate.stats` computes on
what the store returns, and `curate.analysis` composes the two (it imports both;
neither imports the other). Two reads:

- `load_scores(path)`: every rollout row of any table format or run directory,
  validated and de-duplicated (the exact read: its errors name the problem).
- `read_scores(path)`: one scan of a Parquet table or run directory that validates
  the rows and says how they are laid out, so that the statistics can skip the hash
  group-by where the layout makes it unnecessary:

      SampleMajor  S samples x W runs, each sample's W rows together (`curate eval`)
      RunMajor     W blocks of the same S samples in the same order (a harness that
                   runs the data set W times)
      AnyOrder     a lazy frame for one streaming group-by on sample_id, the checks
                   riding along (`AnyOrder.group`)
      Rows         anything else: `load_scores`' rows

  Every layout has passed (or, for AnyOrder, carries) every check of `load_scores`;
  input that trips one, or needs more than a cast, is read by `load_scores` instead,
  so errors and duplicate handling are exactly its own. The token columns come along
  in the same scan (`tokens()`).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from curate.core.deepen import descriptive_rows
from curate.core.reasoning import truncation_of
from curate.errors import InputError, one_line
from curate.store.run_dir import RolloutStore, is_run_dir, pairs_distinct, run_bits
from curate.store.schema import (
    REQUIRED_SCORE_COLUMNS,
    TOKEN_COLUMNS,
    rollout_file_schema,
    scan_rollout_file,
    with_current_names,
)
from curate.store.tables import TABLE_SUFFIXES, read_table, scan_table, table_format

if TYPE_CHECKING:
    import polars as pl

# The columns analysis needs; optional extras are carried when present.
SCORE_COLUMNS = ("sample_id", "rollout_idx", "score", "error")
_EXTRA_COLUMNS = (*TOKEN_COLUMNS, "truncated")


def _input_errors() -> tuple[type[BaseException], ...]:
    """The errors input can cause. On these a fast read gives way to `load_scores`,
    which reads again and names the problem; a bug raises anything else, and surfaces."""
    import polars as pl

    return (pl.exceptions.PolarsError, OSError, ValueError, TypeError, OverflowError)


@dataclass(kw_only=True)
class _Origin:
    """Where scores came from: the path and, for a run directory, its store and manifest."""

    path: Path
    manifest: dict[str, Any] | None = None
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
class ScoreSource(_Origin):
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
        manifest = store.read_manifest() if store.exists() else None
        present = _shard_columns(store)
        cols = [*SCORE_COLUMNS, *(c for c in _EXTRA_COLUMNS if c in present)]
        frame = store.rollouts(cols)
        if frame.height == 0:
            raise InputError("run directory has no rollouts yet", path=path)
        first_n = None if deepening else descriptive_rows(manifest)
        if first_n is not None:
            frame = frame.filter(first_n)
        if excludes_truncated(manifest) and "truncated" in frame.columns:
            frame = frame.filter(_kept())
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
        lf = _score_table(path, json_array=path.suffix.lower() == ".json")
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
    keep = [c for c in (*SCORE_COLUMNS, *_EXTRA_COLUMNS) if c in names]
    try:
        frame = lf.select(keep).collect()
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"cannot read table: {one_line(exc)}", path=path) from exc
    # Taken before de-duplication: every row was paid for.
    tokens = _table_tokens(frame)
    frame = _normalise(frame, path)
    frame = _validate(frame, path)
    frame = _resolve_duplicates(frame, path)
    return ScoreSource(path=path, rollouts=frame, _tokens=tokens, _tokens_read=True)


def excludes_truncated(manifest: dict[str, Any] | None) -> bool:
    """Whether the run leaves its cut-short rollouts out of the statistics (they stay
    stored): `--truncated exclude`, the one place every reader of scores asks."""
    return truncation_of(manifest) == "exclude"


def _kept() -> pl.Expr:
    """Rows an `exclude` run counts: not cut short."""
    import polars as pl

    return ~pl.col("truncated").fill_null(False)


# ---------------------------------------------------------------- the one-scan read


@dataclass(frozen=True)
class SampleMajor:
    """A dense matrix stored sample by sample: `scores` holds one block of `width`
    scores per id of `ids`, in that order; every rollout scored (no error, no null).
    `binary`: every score is exactly 0 or 1."""

    ids: pl.Series
    scores: pl.Series
    width: int
    binary: bool


@dataclass(frozen=True)
class RunMajor:
    """A dense matrix stored run by run: `runs[r][i]` is the score of run r of sample
    `ids[i]`, rollout_idx rising from run to run; every rollout scored."""

    ids: pl.Series
    runs: list[pl.Series]


@dataclass(frozen=True)
class AnyOrder:
    """Rows in any order, not yet proved valid: `group` runs the checks of
    `load_scores` as per-sample counts inside the one group-by the statistics need.
    `binary`: every scored rollout is exactly 0 or 1."""

    rows: pl.LazyFrame  # sample_id, _score (as read), error, and rollout_idx when stored
    has_rollout_idx: bool
    binary: bool

    def group(self, exprs: Sequence[pl.Expr]) -> pl.DataFrame | None:
        """`exprs` per sample_id (over the validated `score` and `error` columns) in one
        streaming group-by; None when a check trips or the rows cannot be read this
        way (then `load_scores` reads them and names the problem)."""
        import polars as pl

        checks = [pl.len().alias("_rows"), _bad_row().sum().alias("_bad")]
        if self.has_rollout_idx:  # distinct (sample_id, rollout_idx) pairs, proved per sample
            checks.append(run_bits().sum().alias("_bits"))
        try:
            agg = (
                self.rows.with_columns(_validated_score())
                .group_by("sample_id")
                .agg(*exprs, *checks)
                .collect(engine="streaming")
            )
        except _input_errors():
            return None
        if agg.height == 0 or agg["sample_id"].null_count() or agg["_bad"].sum():
            return None
        if (
            self.has_rollout_idx
            and not agg.select(
                (pl.col("_bits").bitwise_count_ones() == pl.col("_rows")).all()
            ).item()
        ):
            return None
        return agg.drop("_rows", "_bad", "_bits", strict=False)


@dataclass(frozen=True)
class Rows:
    """`load_scores`' validated, de-duplicated rollouts."""

    frame: pl.DataFrame


Layout: TypeAlias = SampleMajor | RunMajor | AnyOrder | Rows


@dataclass(kw_only=True)
class ScoreRead(_Origin):
    """The rows of one read, how they are laid out, and where they came from.
    `rollouts` holds the validated rows (sample_id, rollout_idx, score, error); after a
    fast read it is lazy, read again only if a statistic needs rows (partial credit)."""

    layout: Layout
    rollouts: pl.LazyFrame
    _errors: pl.Series | None = field(default=None, repr=False)
    # LENGTH_COLUMNS of every rollout when the read had them in memory (None: read them
    # when asked, `read_lengths`).
    _lengths: pl.DataFrame | None = field(default=None, repr=False)

    def lengths(self) -> pl.DataFrame | None:
        """The rows of the report's length section (`read_lengths`), from this read's own
        rows when it held them: no second read of the run."""
        if self._lengths is not None:
            return self._lengths
        return read_lengths(self.path)

    def exact(self) -> ScoreRead:
        """The same input read by `load_scores` (for when `AnyOrder.group` gave up)."""
        read = _exact_read(self.path)
        if self._tokens_read:  # the fast scan saw every row: keep its token columns
            read._tokens, read._tokens_read = self._tokens, True
        return read

    def error_messages(self) -> pl.Series:
        """The `error` text of every failed rollout (taken from the read's own rows when
        it had them in memory, else read once more)."""
        import polars as pl

        if self._errors is None:
            errors = self.rollouts.select("error").filter(pl.col("error").is_not_null())
            self._errors = errors.collect()["error"]
        return self._errors

    def group_labels(self, column: str) -> pl.DataFrame | None:
        """(sample_id, group): each sample's value of `column` as text, from the run's
        samples.parquet or, for a score table, the table itself (a sample's first row);
        None when neither has the column."""
        import polars as pl

        frame: pl.LazyFrame | None = None
        if self.store is not None:
            # Two columns of samples.parquet, not every prompt: the file may be large.
            path = self.store.samples_path
            if path.is_file() and {"sample_id", column} <= set(pl.read_parquet_schema(path)):
                frame = scan_rollout_file(path)
        else:
            try:
                lf = _score_table(self.path, json_array=_is_json(self.path))
                if column in lf.collect_schema().names():
                    frame = lf
            except _input_errors() as exc:
                raise InputError(f"cannot read table: {one_line(exc)}", path=self.path) from exc
        if frame is None:
            return None
        try:
            return (
                frame.select(
                    pl.col("sample_id").cast(pl.String),
                    pl.col(column).cast(pl.String).alias("group"),
                )
                .unique("sample_id", keep="first", maintain_order=True)
                .collect()
            )
        except _input_errors() as exc:
            raise InputError(
                f"column '{column}' cannot group samples: {one_line(exc)}", path=self.path
            ) from exc


def read_scores(path: str | os.PathLike[str], *, fast: bool = True) -> ScoreRead:
    """Read scores once and describe their layout (see the module docstring).

    Only Parquet tables and run directories take the one-scan read; anything else, or
    `fast=False`, is read by `load_scores` (layout `Rows`). Bad input raises its
    InputError, exactly as `load_scores` does.
    """
    path = Path(path)
    read = _one_scan(path) if fast else None
    return read if read is not None else _exact_read(path)


def _score_table(path: Path, *, json_array: bool) -> pl.LazyFrame:
    """A score table given by a user, lazily, under today's column names (a .json file may hold
    one JSON array, which only the eager reader understands)."""
    lf = read_table(path).lazy() if json_array else scan_table(path)
    return with_current_names(lf)


def _is_json(path: Path) -> bool:
    """A .json file may hold one JSON array, which only the eager reader understands."""
    return path.suffix.lower() == ".json"


def _exact_read(path: Path) -> ScoreRead:
    source = load_scores(path)
    # An `exclude` run's rows lack the cut-short ones, which the length section counts.
    held = source.store is None or not excludes_truncated(source.manifest)
    return ScoreRead(
        _lengths=_length_rows(source.rollouts, "score") if held else None,
        _errors=source.rollouts["error"].drop_nulls(),
        path=source.path,
        layout=Rows(source.rollouts),
        rollouts=source.rollouts.lazy(),
        manifest=source.manifest,
        store=source.store,
        _tokens=source._tokens,
        _tokens_read=source._tokens_read,
    )


def _one_scan(path: Path) -> ScoreRead | None:
    """The fast path of `read_scores`; None means "use load_scores"."""
    import polars as pl

    try:
        plan = _one_pass_plan(path)
        if plan is None:
            return None
        frame = plan.rows.collect()
        tokens = _table_tokens(frame) if plan.store is None else _run_tokens(frame)
        binary = _all_binary(frame)
        layout: Layout = _dense_layout(frame, plan.has_rollout_idx, binary) or AnyOrder(
            plan.rows, plan.has_rollout_idx, binary
        )
    # Unreadable or unusual input: load_scores reads it again and names the problem.
    except _input_errors():
        return None
    excluded = plan.store is not None and excludes_truncated(plan.manifest)
    lengths = None if excluded else _length_rows(frame, "_score")
    rows = plan.rows
    if not plan.has_rollout_idx:
        # As load_scores does: number each sample's rows in file order.
        rows = rows.with_columns(
            pl.int_range(pl.len()).over("sample_id").cast(pl.Int32).alias("rollout_idx")
        )
    rollouts = rows.select(
        "sample_id", pl.col("rollout_idx").cast(pl.Int32), _validated_score(), "error"
    )
    return ScoreRead(
        path=path,
        layout=layout,
        rollouts=rollouts,
        manifest=plan.manifest,
        store=plan.store,
        # An `exclude` run's scan skipped rows that were paid for too, and so did a
        # deepened run's (its deepening rows): usage reads all.
        _tokens=tokens,
        _tokens_read=not (
            plan.store is not None
            and (excludes_truncated(plan.manifest) or descriptive_rows(plan.manifest) is not None)
        ),
        # The rows are in memory now: the error texts cost nothing more to keep.
        _errors=frame["error"].drop_nulls(),
        _lengths=lengths,
    )


def _bad_row() -> pl.Expr:
    """True for a row that load_scores refuses: a score outside [0, 1] (NaN is outside)
    or no score and no error."""
    import polars as pl

    return ~pl.col("_score").is_between(0.0, 1.0).fill_null(pl.col("error").is_not_null())


def _validated_score() -> pl.Expr:
    """As load_scores' `_validate`: an error row carries no score."""
    import polars as pl

    return pl.when(pl.col("error").is_null()).then(pl.col("_score")).alias("score")


def _all_binary(frame: pl.DataFrame) -> bool:
    """Every scored rollout (no error, a score) is exactly 0 or 1."""
    import polars as pl

    # Without failed rollouts every score counts: compare the column as read rather
    # than build a validated copy of it (millions of rows).
    no_errors = frame["error"].null_count() == frame.height
    score = pl.col("_score") if no_errors else _validated_score()
    return bool(frame.select(((score == 0.0) | (score == 1.0)).all()).item())


def _dense_layout(
    frame: pl.DataFrame, has_rollout_idx: bool, binary: bool
) -> SampleMajor | RunMajor | None:
    """The layout when the rows are a dense matrix of S samples x W runs with no failed
    rollout, stored sample-major or run-major, every check passed. None when the rows
    are laid out otherwise or fail a check (the hash group-by or load_scores decides
    then). `binary`: every score is exactly 0 or 1 (`_all_binary`).
    """

    total = frame.height
    if total == 0:
        return None
    # Null counts are kept with the data: free. Only scores need a pass, and the
    # range check (NaN, outside [0, 1]) only when they are not all exactly 0 or 1.
    if frame["sample_id"].null_count() or frame["error"].null_count() != total:
        return None
    if not (binary and frame["_score"].null_count() == 0) and frame.select(_bad_row().any()).item():
        return None
    if has_rollout_idx:
        rid = frame["rollout_idx"]
        # load_scores stores rollout_idx as Int32 (and fails on what does not fit).
        if rid.null_count() or not -(2**31) <= int(rid.min()) <= int(rid.max()) < 2**31:  # type: ignore[arg-type]
            return None
    # Where the first sample's rows are tells the layout: rows 0..W-1 (sample-major),
    # or rows 0, S, 2S, ... (run-major). Anything else is left to the hash group-by.
    # A short prefix gives W; `_sample_major` then checks every row.
    ids = frame["sample_id"]
    probe = ids.head(_WIDTH_PROBE)
    changes = (probe != probe[0]).arg_true()
    width = int(changes[0]) if len(changes) else 0
    if width >= 2:
        return _sample_major(frame, width, has_rollout_idx, binary)
    first = (ids == ids[0]).arg_true()
    count = len(first)
    if width == 0 and count >= 2 and int(first[-1]) == count - 1:  # a block past the probe
        return _sample_major(frame, count, has_rollout_idx, binary)
    if 2 <= count <= _MAX_RUN_BLOCKS:
        return _run_major(frame, first, has_rollout_idx)
    return None


# The most run blocks `_run_major` takes (one expression per block).
_MAX_RUN_BLOCKS = 64
# Rows read to find the first sample's block width (any width works; wider blocks
# take one more pass).
_WIDTH_PROBE = 4096


def _sample_major(
    frame: pl.DataFrame, width: int, has_rollout_idx: bool, binary: bool
) -> SampleMajor | None:
    """Blocks of `width` rows, one per sample, rollout_idx rising within each."""

    import polars as pl

    total = frame.height
    if total % width:
        return None
    sid = frame["sample_id"]
    # same[i]: row i+1 holds row i's sample. False exactly at the block ends.
    same = _adjacent(sid, operator.eq)
    # Exactly blocks - 1 pairs differ, and each expected block end is one of them.
    blocks = total // width
    if same.sum() != total - blocks:
        return None
    if same.gather(pl.int_range(width - 1, total - 1, width, dtype=pl.UInt32, eager=True)).any():
        return None
    # Strictly rising rollout_idx within a block: no (sample_id, rollout_idx) pair repeats.
    if has_rollout_idx and (same & ~_adjacent(frame["rollout_idx"], operator.gt)).any():
        return None
    del same
    ids = _every_nth(sid, width)
    if not _all_distinct(ids):  # a sample split over two blocks
        return None
    return SampleMajor(ids=ids, scores=frame["_score"], width=width, binary=binary)


def _adjacent(column: pl.Series, op: Callable[[Any, Any], Any]) -> pl.Series:
    """op(row i+1, row i) for every i, as a boolean Series of len - 1.

    Worked chunk by chunk (the row groups of the file): a shifted comparison of the
    whole column copies it first, and on millions of rows the copy costs more than
    the comparison.
    """
    import polars as pl

    parts: list[pl.Series] = []
    previous: Any = None
    for chunk in column.get_chunks():
        if chunk.len() == 0:
            continue
        if previous is not None:
            parts.append(pl.Series([bool(op(chunk[0], previous))], dtype=pl.Boolean))
        parts.append(op(chunk.slice(1), chunk.slice(0, chunk.len() - 1)))
        previous = chunk[-1]
    return pl.concat(parts) if parts else pl.Series(dtype=pl.Boolean)


def _every_nth(column: pl.Series, n: int) -> pl.Series:
    """column.gather_every(n), chunk by chunk (no copy of the whole column)."""
    import polars as pl

    parts, offset = [], 0
    for chunk in column.get_chunks():
        parts.append(chunk.gather_every(n, offset=(-offset) % n))
        offset += chunk.len()
    return pl.concat(parts)


def _all_distinct(ids: pl.Series) -> bool:
    """No id repeats. Distinct 64-bit hashes prove it at a fraction of the cost of
    hashing the strings into a table; only a hash collision needs the exact count."""
    return ids.hash().n_unique() == len(ids) or ids.n_unique() == len(ids)


def _run_major(frame: pl.DataFrame, first: pl.Series, has_rollout_idx: bool) -> RunMajor | None:
    """W blocks of S rows, each the same S samples in the same order, rollout_idx rising
    from block to block for every sample; `first` holds the rows of the first sample."""
    import polars as pl

    total, width = frame.height, len(first)
    size = int(first[1])
    if size * width != total or not first.equals(
        pl.int_range(0, total, size, eager=True), check_dtypes=False, check_names=False
    ):
        return None
    ids = frame["sample_id"].slice(0, size)
    if not all((frame["sample_id"].slice(r * size, size) == ids).all() for r in range(1, width)):
        return None
    if has_rollout_idx:
        rid = frame["rollout_idx"]
        if not all(
            (rid.slice(r * size, size) > rid.slice((r - 1) * size, size)).all()
            for r in range(1, width)
        ):
            return None
    if ids.n_unique() != size:
        return None
    return RunMajor(ids=ids, runs=[frame["_score"].slice(r * size, size) for r in range(width)])


class _Plan(NamedTuple):
    """How `_one_scan` reads: `rows` has `sample_id` (String), `_score` (Float64, as in
    the file), `error` (String), maybe `rollout_idx`, cast as load_scores casts, and the
    token columns as stored."""

    rows: pl.LazyFrame
    has_rollout_idx: bool
    manifest: dict[str, Any] | None
    store: RolloutStore | None


def _one_pass_plan(path: Path) -> _Plan | None:
    """The one scan's plan; None when only load_scores can read the input exactly."""
    import polars as pl

    if path.is_dir():
        if not is_run_dir(path):
            return None
        store = RolloutStore(path)
        manifest = store.read_manifest() if store.exists() else None
        shards = store.shard_paths()
        if not shards:
            return None
        # load_scores reads these columns of every shard: each must have them, alike.
        cols = [*SCORE_COLUMNS, *(c for c in _EXTRA_COLUMNS if c in _shard_columns(store))]
        schemas = [rollout_file_schema(s) for s in shards]
        first = {c: schemas[0].get(c) for c in cols}
        if any({c: s.get(c) for c in cols} != first for s in schemas):
            return None
        if (
            first["sample_id"] != pl.String
            or first["error"] != pl.String
            or first["score"] != pl.Float64
            or first["rollout_idx"] is None
            or not first["rollout_idx"].is_integer()
        ):
            return None
        # The report counts tokens only when the run records both (as it always did).
        tokens = [c for c in TOKEN_COLUMNS if c in cols] if set(TOKEN_COLUMNS) <= set(cols) else []
        if excludes_truncated(manifest):
            if "truncated" not in cols:
                return None
            lf = store.scan([*SCORE_COLUMNS, *tokens, "truncated"]).filter(_kept())
            lf = lf.drop("_shard", "truncated")
        else:
            # `truncated` rides along for the report's length section (no second read).
            flags = ["truncated"] if tokens and "truncated" in cols else []
            lf = store.scan([*SCORE_COLUMNS, *tokens, *flags]).drop("_shard")
        first_n = descriptive_rows(manifest)
        if first_n is not None:
            lf = lf.filter(first_n)
        return _Plan(lf.rename({"score": "_score"}), True, manifest, store)

    # Existence first: a missing path is load_scores' to name, not an unknown format.
    if not path.is_file() or table_format(path) != "parquet":
        return None
    lf = _score_table(path, json_array=False)
    schema = lf.collect_schema()
    if any(c not in schema for c in REQUIRED_SCORE_COLUMNS):
        return None
    score = schema["score"]
    if not (score == pl.Boolean or score.is_numeric()):
        return None
    has_rollout_idx = "rollout_idx" in schema
    if has_rollout_idx and not schema["rollout_idx"].is_integer():
        return None
    error = (
        pl.col("error").cast(pl.String).replace("", None)
        if "error" in schema
        else pl.lit(None, dtype=pl.String)
    )
    rows = lf.select(
        pl.col("sample_id").cast(pl.String),
        *(["rollout_idx"] if has_rollout_idx else []),
        pl.col("score").cast(pl.Float64).alias("_score"),
        error.alias("error"),
        *(c for c in TOKEN_COLUMNS if c in schema),
        *(["truncated"] if "truncated" in schema and "completion_tokens" in schema else []),
    )
    return _Plan(rows, has_rollout_idx, None, None)


def _table_tokens(frame: pl.DataFrame) -> pl.DataFrame | None:
    """A table's token columns as integers (a value that is not one counts as missing)."""
    import polars as pl

    cols = [c for c in TOKEN_COLUMNS if c in frame.columns]
    if not cols:
        return None
    try:
        return frame.select(pl.col(c).cast(pl.Int64, strict=False) for c in cols)
    except _input_errors():  # usage is optional: the scores decide whether a read works
        return None


def _run_tokens(frame: pl.DataFrame) -> pl.DataFrame | None:
    """A run directory's token columns, as stored, when its shards have both."""
    return frame.select(TOKEN_COLUMNS) if set(TOKEN_COLUMNS) <= set(frame.columns) else None


def _stored_tokens(store: RolloutStore) -> pl.DataFrame | None:
    """The token columns of every row of every shard, when the shards have both."""

    try:
        shards = store.shard_paths()
        if not shards or not set(TOKEN_COLUMNS) <= set(rollout_file_schema(shards[0])):
            return None
        return store.scan(list(TOKEN_COLUMNS)).drop("_shard").collect()
    except _input_errors():  # usage is optional: the scores decide whether a read works
        return None


def _shard_columns(store: RolloutStore) -> set[str]:

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
        *(c for c in _EXTRA_COLUMNS if c in frame.columns),
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


def _length_rows(frame: pl.DataFrame, score: str) -> pl.DataFrame | None:
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
    except _input_errors():  # optional section: the scores decide whether a read works
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
            have = _shard_columns(store)
            if "completion_tokens" not in have:
                return None
            cols = [c for c in LENGTH_COLUMNS if c in have]
            first_n = descriptive_rows(store.read_manifest() if store.exists() else None)
            frame = store.rollouts(cols if first_n is None else [*cols, "rollout_idx"])
            if first_n is not None:  # a deepened run: its first N rollouts, as the scores
                frame = frame.filter(first_n)
        else:
            if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
                return None
            lf = _score_table(path, json_array=_is_json(path))
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
    except _input_errors():  # optional section: the scores' own read names real problems
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
    unreadable: tuple[type[BaseException], ...] = (InputError, *_input_errors())
    try:
        if path.is_dir():
            return is_run_dir(path) and ANSWER_COLUMN in _shard_columns(RolloutStore(path))
        if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
            return False
        lf = _score_table(path, json_array=_is_json(path))
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
        manifest = store.read_manifest() if store.exists() else None
        exclude = excludes_truncated(manifest) and "truncated" in _shard_columns(store)
        frame = store.rollouts([*SCORE_COLUMNS, ANSWER_COLUMN, *(["truncated"] if exclude else [])])
        if exclude:
            frame = frame.filter(_kept())
        first_n = descriptive_rows(manifest)
        if first_n is not None:
            frame = frame.filter(first_n)
        if frame.height == 0:
            raise InputError("run directory has no rollouts yet", path=path)
        return _validate(frame, path).select(cols)
    lf = _score_table(path, json_array=_is_json(path))
    names = lf.collect_schema().names()
    try:
        frame = lf.select(c for c in (*SCORE_COLUMNS, ANSWER_COLUMN) if c in names).collect()
        answers = frame[ANSWER_COLUMN].cast(pl.String)
    except _input_errors() as exc:
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
    unreadable: tuple[type[BaseException], ...] = (InputError, *_input_errors())
    try:
        if path.is_dir():
            if not is_run_dir(path):
                return None
            store = RolloutStore(path)
            have = _shard_columns(store) if store.shard_paths() else set()
            if COMPLETION_COLUMN not in have:
                return None
            cols = ["sample_id", "rollout_idx", "error", *([COMPLETION_COLUMN] if text else [])]
            tokens = "completion_tokens" in have
            lf = store.scan(cols + (["completion_tokens"] if tokens else [])).drop("_shard")
            first_n = descriptive_rows(store.read_manifest() if store.exists() else None)
            if first_n is not None:  # a deepened run: its first N rollouts, as the scores
                lf = lf.filter(first_n)
        else:
            if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
                return None
            lf = _score_table(path, json_array=_is_json(path))
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
