"""The run directory: manifest, input samples, and append-only rollout shards.

Layout (docs/reference/run-directory.md):

    RUN/
      manifest.json        what produced the run (never a secret): curate.store.manifest
      samples.parquet      the input samples with their original fields + sample_id
      rollouts/part-*.parquet   append-only shards, written atomically
      rollouts/corrupt/    shards set aside by `curate eval --set-aside-corrupt`
      .lock                present while a `curate eval` writes the directory
      .lock.shard-I-of-K   present while `curate eval --shard I/K` writes its shard
      .manifest.lock       taken for a moment by shard writers to check and write the
                           manifest (left in place: removing it would race)

`RolloutStore` owns one such directory. Its writer lock (one writer at a time, or K
shard writers side by side) is `curate.store.locks`; readers de-duplicate on
(sample_id, rollout_idx) by the rule of `curate.store.duplicates`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.settled import SETTLED_COLUMN, settled_error_expr, settled_expr
from curate.core.shards import ShardSpec
from curate.errors import InputError, one_line
from curate.store.atomic import atomic_path, atomic_write_text
from curate.store.duplicates import resolve_repeats, strictly_sorted
from curate.store.locks import (
    LOCK_FILE,
    LockHolder,
    hold_manifest_lock,
    hold_writer_lock,
    shard_lock_holders,
    shard_lock_path,
    shard_writers,
)
from curate.store.manifest import RunManifest, manifest_text, read_manifest_file
from curate.store.schema import (
    LATE_ROLLOUT_COLUMNS,
    MANIFEST_FILE,
    ROLLOUT_COLUMNS,
    ROLLOUTS_DIR,
    SAMPLES_FILE,
    rollout_file_schema,
    rollout_schema,
    scan_rollout_file,
)

if TYPE_CHECKING:
    import polars as pl

_shard_counter = itertools.count()

CORRUPT_DIR = "corrupt"
SET_ASIDE_OPTION = "--set-aside-corrupt"
# Columns every shard must have, with these dtypes, for a reader to use it at all.
KEY_COLUMNS = ("sample_id", "rollout_idx", "score", "error")


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """True when `path` looks like a directory written by `curate eval`."""
    path = Path(path)
    return path.is_dir() and ((path / MANIFEST_FILE).is_file() or (path / ROLLOUTS_DIR).is_dir())


class RolloutStore:
    """Owns one run directory on disk."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self._writer_depth = 0

    # -- paths ------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.run_dir / MANIFEST_FILE

    @property
    def samples_path(self) -> Path:
        return self.run_dir / SAMPLES_FILE

    @property
    def rollouts_dir(self) -> Path:
        return self.run_dir / ROLLOUTS_DIR

    @property
    def lock_path(self) -> Path:
        return self.run_dir / LOCK_FILE

    @property
    def corrupt_dir(self) -> Path:
        return self.rollouts_dir / CORRUPT_DIR

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def create(self) -> None:
        """Create the directory layout (idempotent)."""
        self.rollouts_dir.mkdir(parents=True, exist_ok=True)

    def clear(self) -> None:
        """Remove the manifest, samples and every shard (`--force-new`); keeps the lock."""
        for path in (self.rollouts_dir, self.manifest_path, self.samples_path):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()

    # -- the writer lock ----------------------------------------------------
    def shard_lock_path(self, shard: ShardSpec) -> Path:
        return shard_lock_path(self.run_dir, shard)

    @contextlib.contextmanager
    def writer(self, shard: ShardSpec | None = None) -> Iterator[RolloutStore]:
        """Hold the run directory's writer lock for a writing session
        (`curate.store.locks.hold_writer_lock`). Re-entrant on the same store object."""
        if self._writer_depth:
            self._writer_depth += 1
            try:
                yield self
            finally:
                self._writer_depth -= 1
            return
        with hold_writer_lock(self.run_dir, shard):
            self._writer_depth = 1
            try:
                yield self
            finally:
                self._writer_depth = 0

    def shard_writers(self) -> dict[str, LockHolder]:
        """Shard ('I/K') -> its writer, for every shard lock held now."""
        return shard_writers(self.run_dir)

    def shard_lock_holders(self) -> dict[str, LockHolder]:
        """Shard ('I/K') -> who its lock file names, held now or not (see
        `curate.store.locks.shard_lock_holders`)."""
        return shard_lock_holders(self.run_dir)

    def manifest_lock(self) -> contextlib.AbstractContextManager[None]:
        """Exclusive for the moment shard writers check and write the manifest."""
        return hold_manifest_lock(self.run_dir)

    def writer_held(self) -> bool:
        """Whether this store object holds the writer lock now."""
        return self._writer_depth > 0

    # -- manifest ---------------------------------------------------------
    def load_manifest(self) -> RunManifest:
        """The manifest, checked once (`curate.store.manifest`); InputError naming the
        file and the field when it is not right, or the directory when it has none."""
        return read_manifest_file(self.manifest_path)

    def manifest_if_any(self) -> RunManifest | None:
        """The manifest, or None when the directory has none (a bare rollouts/)."""
        return self.load_manifest() if self.exists() else None

    def read_manifest(self) -> dict[str, Any]:
        """The manifest's JSON object as stored, checked: for a writer that edits it
        (readers take `load_manifest`'s typed fields)."""
        return dict(self.load_manifest().data)

    def previous_manifest(self) -> RunManifest | None:
        """The manifest a resume must match: None when there is none, or when the
        directory holds no rollout yet (a first attempt that failed before writing any
        fixes nothing, so it must not fix the settings either)."""
        if not self.exists() or not self.shard_paths():
            return None
        return self.load_manifest()

    def write_manifest(self, manifest: RunManifest | Mapping[str, Any]) -> None:
        """Write `manifest` atomically, checked as a reader will check it (a field of the
        wrong type is refused here, not by the next reader)."""
        if not isinstance(manifest, RunManifest):
            manifest = RunManifest.from_json(manifest, self.manifest_path)
        atomic_write_text(self.manifest_path, manifest_text(manifest))

    # -- samples ----------------------------------------------------------
    def write_samples(self, samples: pl.DataFrame) -> None:
        with atomic_path(self.samples_path) as tmp:
            samples.write_parquet(tmp)

    def read_samples(self) -> pl.DataFrame | None:
        import polars as pl

        if not self.samples_path.is_file():
            return None
        try:
            return pl.read_parquet(self.samples_path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise InputError(
                f"cannot read the samples file: {_short(exc)}", path=self.samples_path
            ) from exc

    # -- rollouts ---------------------------------------------------------
    def append(self, rollouts: pl.DataFrame) -> Path | None:
        """Write `rollouts` as a new shard (atomically); columns not given are null."""
        import polars as pl

        if rollouts.height == 0:
            return None
        self.create()
        schema = rollout_schema()
        unknown = set(rollouts.columns) - set(schema)
        if unknown:
            raise ValueError(f"unknown rollout columns: {sorted(unknown)}")
        frame = rollouts.select(
            [
                (pl.col(name) if name in rollouts.columns else pl.lit(None))
                .cast(dtype)  # type: ignore[arg-type]
                .alias(name)
                for name, dtype in schema.items()
            ]
        ).sort("sample_id", "rollout_idx")
        # Time-ordered names: lexical order is write order, which dedup relies on.
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{next(_shard_counter):06d}.parquet"
        target = self.rollouts_dir / name
        with atomic_path(target) as tmp:
            frame.write_parquet(tmp)
        return target

    def shard_paths(self) -> list[Path]:
        if not self.rollouts_dir.is_dir():
            return []
        return sorted(p for p in self.rollouts_dir.glob("part-*.parquet") if p.is_file())

    def scan(
        self, columns: list[str] | None = None, *, shards: list[Path] | None = None
    ) -> pl.LazyFrame:
        """All shards (or `shards`), in write order, as one lazy frame with a `_shard`
        column: the index of the row's shard in that list."""
        import polars as pl

        shards = self.shard_paths() if shards is None else shards
        cols = columns or list(ROLLOUT_COLUMNS)
        if not shards:
            return pl.LazyFrame(
                schema={name: rollout_schema()[name] for name in cols}  # type: ignore[misc]
            ).with_columns(pl.lit(0, dtype=pl.Int32).alias("_shard"))
        late = [name for name in cols if name in LATE_ROLLOUT_COLUMNS]
        frames = [
            _scan_shard(path, cols, late).with_columns(pl.lit(i, dtype=pl.Int32).alias("_shard"))
            for i, path in enumerate(shards)
        ]
        return pl.concat(frames, how="vertical")

    def rollouts(self, columns: list[str] | None = None) -> pl.DataFrame:
        """De-duplicated rollouts: one row per (sample_id, rollout_idx).

        Raises InputError naming the shard when one cannot be read, and naming the
        pair and the shards when two scored rows of a pair disagree.
        """

        wanted = list(columns or ROLLOUT_COLUMNS)
        for key in ("sample_id", "rollout_idx", "error"):
            if key not in wanted:
                wanted.append(key)
        cols = wanted + ([] if "score" in wanted else ["score"])
        shards = self.shard_paths()
        frame = self._collect(self.scan(cols, shards=shards), shards, cols)
        # The score decides conflicts; callers that did not ask for it do not get it.
        extra = [] if "score" in wanted else ["score"]
        # The usual case, no repeated pair, in (sample_id, rollout_idx) order as the
        # de-duplicating path returns it: shards are written sorted, and often follow
        # each other in order too (a linear check, ~15 ms on a million rows).
        if strictly_sorted(frame):
            return frame.drop("_shard", *extra)
        # Shards out of order: the sort is needed anyway, and once sorted the same
        # linear check proves the pairs distinct (cheaper than a group-by or a hash).
        frame = frame.sort("sample_id", "rollout_idx", "_shard")
        if strictly_sorted(frame):
            return frame.drop("_shard", *extra)
        return resolve_repeats(frame, shards, self.rollouts_dir).drop("_shard", *extra)

    def _collect(self, lf: pl.LazyFrame, shards: list[Path], cols: list[str]) -> pl.DataFrame:
        """`lf` collected; when a shard cannot be read, an InputError naming it."""
        import polars as pl

        try:
            return lf.collect()
        except (pl.exceptions.PolarsError, OSError) as exc:
            bad = [(path, p) for path in shards if (p := shard_problem(path, cols))]
            if not bad:
                raise InputError(
                    f"cannot read rollout shards: {_short(exc)}", path=self.rollouts_dir
                ) from exc
            path, problem = bad[0]
            more = f" ({len(bad) - 1} more unreadable shard(s))" if len(bad) > 1 else ""
            hint = ""
            if shard_problem(path, list(KEY_COLUMNS)) is not None:  # what set-aside moves
                hint = (
                    f"; re-run `curate eval` with {SET_ASIDE_OPTION} to move unreadable "
                    f"shards into {ROLLOUTS_DIR}/{CORRUPT_DIR}/ (every good rollout is "
                    "kept, the rest re-generated)"
                )
            raise InputError(
                f"cannot read rollout shard: {problem}{more}{hint}",
                path=path,
            ) from exc

    def completed_pairs(self) -> pl.DataFrame:
        """(sample_id, rollout_idx) pairs that a resume does not redo: a scored rollout, or
        an error that recurs (`curate.core.settled`)."""

        cols = ["sample_id", "rollout_idx", "error", SETTLED_COLUMN]
        shards = self.shard_paths()
        frame = self._collect(self.scan(cols, shards=shards), shards, cols)
        return frame.filter(settled_expr()).select("sample_id", "rollout_idx").unique()

    def missing_pairs(self, sample_ids: Sequence[str] | pl.Series, runs: int) -> int:
        """How many pairs (sample_id, rollout_idx < runs) of `sample_ids` a resume would
        redo (no scored rollout, no settled error): 0 means a fixed-N `curate eval` has
        nothing left to do."""
        return self.pair_tally(sample_ids, runs).missing

    def pair_tally(self, sample_ids: Sequence[str] | pl.Series, runs: int) -> PairTally:
        """The pairs (sample_id, rollout_idx < runs) of `sample_ids`: how many are expected,
        scored, and stored as an error that recurs (`curate.core.settled`)."""
        import polars as pl

        ids = pl.Series("sample_id", sample_ids, dtype=pl.String).unique()
        total = ids.len() * runs
        if total == 0 or not self.shard_paths():
            return PairTally(expected=total, scored=0, settled=0)
        stored = self.rollouts(["sample_id", "rollout_idx", "error", SETTLED_COLUMN])
        mine = stored.filter(
            pl.col("rollout_idx").is_between(0, runs - 1) & pl.col("sample_id").is_in(ids.implode())
        )
        counts = mine.select(
            pl.col("error").is_null().sum().alias("scored"),
            settled_error_expr().sum().alias("settled"),
        ).row(0)
        return PairTally(expected=total, scored=int(counts[0]), settled=int(counts[1]))


@dataclass(frozen=True, slots=True)
class PairTally:
    """Where a run's (sample_id, rollout_idx) pairs stand (`RolloutStore.pair_tally`)."""

    expected: int
    scored: int
    settled: int  # stored as an error that recurs on a re-run: done, with an error

    @property
    def missing(self) -> int:
        """Pairs a re-run would generate: nothing stored, or a retryable error."""
        return self.expected - self.scored - self.settled

    @property
    def never_scored(self) -> bool:
        """Every pair is done and none holds a score: a re-run cannot change that."""
        return self.missing == 0 and self.expected > 0 and self.scored == 0


def set_aside_corrupt_shards(store: RolloutStore) -> list[Path]:
    """Move every shard that cannot be read into RUN/rollouts/corrupt/; returns the new
    paths. The other shards, and so every readable rollout, stay; a resume then
    re-generates what the set-aside shards held. Take `store.writer()` first."""
    moved = []
    for path in store.shard_paths():
        if shard_problem(path, list(KEY_COLUMNS)) is None:
            continue
        store.corrupt_dir.mkdir(exist_ok=True)
        target = store.corrupt_dir / path.name
        while target.exists():  # set aside before under the same name: keep both
            target = target.with_name(f"{target.stem}-{os.urandom(3).hex()}{target.suffix}")
        os.replace(path, target)
        moved.append(target)
    return moved


def _scan_shard(path: Path, cols: list[str], late: list[str]) -> pl.LazyFrame:
    """One shard's `cols`; a column added after the shard was written reads as null."""
    import polars as pl

    lf = scan_rollout_file(path)
    if late:
        try:
            have = set(rollout_file_schema(path))
        except (pl.exceptions.PolarsError, OSError):
            have = set(late)  # unreadable: the scan fails and `_collect` names the shard
        absent = [name for name in late if name not in have]
        if absent:
            schema = rollout_schema()
            return lf.select(
                [
                    pl.lit(None, dtype=schema[name]).alias(name)  # type: ignore[arg-type]
                    if name in absent
                    else pl.col(name)
                    for name in cols
                ]
            )
    return lf.select(cols)


def shard_problem(path: Path, columns: list[str]) -> str | None:
    """Why `path` cannot serve `columns` as a rollout shard (None: it can).

    Reads the whole file, so every page is decoded; used on the error path only.
    """
    import polars as pl

    try:
        schema = rollout_file_schema(path)
        expected = rollout_schema()
        for name in columns:
            if name not in schema and name not in LATE_ROLLOUT_COLUMNS:
                return f"no '{name}' column"
            if name in expected and name in schema and schema[name] != expected[name]:
                return f"column '{name}' is {schema[name]}, expected {expected[name]}"
        pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        return f"not a readable Parquet file ({_short(exc)})"
    return None


def _short(exc: BaseException, limit: int = 160) -> str:
    return one_line(exc, limit)
