"""The fast path of reading scores: one scan that also says how the rows are laid out.

`read_scores(path)` scans a Parquet table or run directory once, validates the rows
and describes their layout, so that the statistics can skip the hash group-by where
the layout makes it unnecessary. Every reader of per-sample aggregates takes it,
through `curate.analysis.load_aggregated` / `load_analysis` (report, plot, compare,
allocate, view); a caller that needs the rows themselves asks `fast=False`:

    SampleMajor  S samples x W runs, each sample's W rows together (`curate eval`)
    RunMajor     W blocks of the same S samples in the same order (a harness that
                 runs the data set W times)
    AnyOrder     a lazy frame for one streaming group-by on sample_id, the checks
                 riding along (`AnyOrder.group`)
    Rows         anything else: the exact read's rows (`curate.store.scores.load_scores`)

Every layout has passed (or, for AnyOrder, carries) every check of `load_scores`;
input that trips one, needs more than a cast, or is not Parquet is read by
`load_scores` instead, so errors and duplicate handling are exactly its own. The token
columns come along in the same scan (`tokens()`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from curate.core.deepen import descriptive_rows
from curate.errors import InputError, one_line
from curate.store.duplicates import run_bits
from curate.store.manifest import RunManifest
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.store.schema import (
    REQUIRED_SCORE_COLUMNS,
    TOKEN_COLUMNS,
    rollout_file_schema,
    scan_rollout_file,
)
from curate.store.scores import (
    EXTRA_COLUMNS,
    SCORE_COLUMNS,
    ScoreOrigin,
    excludes_truncated,
    input_errors,
    is_json,
    kept_rows,
    length_rows,
    load_scores,
    read_lengths,
    score_table,
    shard_columns,
    table_tokens,
)
from curate.store.tables import table_format

if TYPE_CHECKING:
    import polars as pl


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
        except input_errors():
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
class ScoreRead(ScoreOrigin):
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
                lf = score_table(self.path, json_array=is_json(self.path))
                if column in lf.collect_schema().names():
                    frame = lf
            except input_errors() as exc:
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
        except input_errors() as exc:
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


def _exact_read(path: Path) -> ScoreRead:
    source = load_scores(path)
    # An `exclude` run's rows lack the cut-short ones, which the length section counts.
    held = source.store is None or not excludes_truncated(source.manifest)
    return ScoreRead(
        _lengths=length_rows(source.rollouts, "score") if held else None,
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
        tokens = table_tokens(frame) if plan.store is None else _run_tokens(frame)
        binary = _all_binary(frame)
        layout: Layout = _dense_layout(frame, plan.has_rollout_idx, binary) or AnyOrder(
            plan.rows, plan.has_rollout_idx, binary
        )
    # Unreadable or unusual input: load_scores reads it again and names the problem.
    except input_errors():
        return None
    excluded = plan.store is not None and excludes_truncated(plan.manifest)
    lengths = None if excluded else length_rows(frame, "_score")
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
    import operator

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
    manifest: RunManifest | None
    store: RolloutStore | None


def _one_pass_plan(path: Path) -> _Plan | None:
    """The one scan's plan; None when only load_scores can read the input exactly."""
    import polars as pl

    if path.is_dir():
        if not is_run_dir(path):
            return None
        store = RolloutStore(path)
        manifest = store.manifest_if_any()
        shards = store.shard_paths()
        if not shards:
            return None
        # load_scores reads these columns of every shard: each must have them, alike.
        cols = [*SCORE_COLUMNS, *(c for c in EXTRA_COLUMNS if c in shard_columns(store))]
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
            lf = store.scan([*SCORE_COLUMNS, *tokens, "truncated"]).filter(kept_rows())
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
    lf = score_table(path, json_array=False)
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


def _run_tokens(frame: pl.DataFrame) -> pl.DataFrame | None:
    """A run directory's token columns, as stored, when its shards have both."""
    return frame.select(TOKEN_COLUMNS) if set(TOKEN_COLUMNS) <= set(frame.columns) else None
