"""The run directory: manifest, input samples, and append-only rollout shards.

Layout (documented in the README):

    RUN/
      manifest.json        what produced the run (never a secret)
      samples.parquet      the input samples with their original fields + sample_id
      rollouts/part-*.parquet   append-only shards, written atomically
      rollouts/corrupt/    shards set aside by `curate eval --set-aside-corrupt`
      .lock                present while a `curate eval` writes the directory
      .lock.shard-I-of-K   present while `curate eval --shard I/K` writes its shard
      .manifest.lock       taken for a moment by shard writers to check and write the
                           manifest (left in place: removing it would race)

One writer at a time: `RolloutStore.writer()` holds an exclusive `flock` on RUN/.lock
for the whole writing session, so a second `curate eval` on the same directory is
refused instead of writing every rollout a second time.

Array jobs (`--shard I/K`) write disjoint samples, so K of them may write at once:
each holds a *shared* flock on RUN/.lock (which keeps an unsharded writer out, and is
refused while one writes) and an exclusive flock on its own RUN/.lock.shard-I-of-K
(which refuses a second writer of the same shard). Shard writers check and update the
manifest under RUN/.manifest.lock, so the first one's settings bind the others.

Readers de-duplicate on (sample_id, rollout_idx): a scored row beats an error row (a
resumed run re-tries failed rollouts), and of two error rows the later shard wins.
Two *scored* rows with different scores are a conflict (two writers at once): reading
refuses them rather than pick one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import itertools
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.settled import SETTLED_COLUMN, settled_error_expr, settled_expr
from curate.core.shards import ShardSpec
from curate.errors import InputError, RunError, one_line
from curate.store.atomic import atomic_path, atomic_write_text
from curate.store.schema import (
    FORMAT_VERSION,
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

LOCK_FILE = ".lock"
SHARD_LOCK_PREFIX = ".lock.shard-"  # + "I-of-K"
MANIFEST_LOCK_FILE = ".manifest.lock"
# How long a shard writer retries a lock held for a moment by a finishing writer (or a
# `curate status` probe) before it calls the run busy.
LOCK_PATIENCE_S = 1.0
CORRUPT_DIR = "corrupt"
SET_ASIDE_OPTION = "--set-aside-corrupt"
# Columns every shard must have, with these dtypes, for a reader to use it at all.
KEY_COLUMNS = ("sample_id", "rollout_idx", "score", "error")


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    """True when `path` looks like a directory written by `curate eval`."""
    path = Path(path)
    return path.is_dir() and ((path / MANIFEST_FILE).is_file() or (path / ROLLOUTS_DIR).is_dir())


class RunDirBusyError(RunError):
    """Another process holds the run directory's writer lock.

    Exit 1, not 2: the command is right and nothing is wrong with the input; the same
    command succeeds (and resumes) once the other writer is done.
    """


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a writer lock, as it wrote itself into RUN/.lock."""

    pid: int | None
    host: str | None
    since: float | None  # epoch seconds

    def describe(self) -> str:
        """'another curate eval (pid 1234 on host, since 10:42:07)'."""
        parts = []
        if self.pid is not None:
            parts.append(f"pid {self.pid}" + (f" on {self.host}" if self.host else ""))
        if self.since is not None:
            started = dt.datetime.fromtimestamp(self.since)
            fmt = "%H:%M:%S" if started.date() == dt.date.today() else "%Y-%m-%d %H:%M:%S"
            parts.append(f"since {started.strftime(fmt)}")
        return "another curate eval" + (f" ({', '.join(parts)})" if parts else "")

    @property
    def where(self) -> str:
        """'pid@host' (or what of it is known)."""
        return f"{self.pid if self.pid is not None else '?'}@{self.host or '?'}"

    def alive(self) -> bool | None:
        """Whether the holder's process still runs: None when it is on another host
        (or unknown), where this process cannot tell."""
        if self.pid is None or self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


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
        return self.run_dir / f"{SHARD_LOCK_PREFIX}{shard.key}"

    @contextlib.contextmanager
    def writer(self, shard: ShardSpec | None = None) -> Iterator[RolloutStore]:
        """Hold the run directory's writer lock for a writing session.

        Creates the directory if needed. A second writer (another process, or another
        RolloutStore in this one) gets RunDirBusyError naming the holder. The OS drops
        the lock when its holder dies, even by SIGKILL, so it never goes stale.
        Re-entrant on the same store object. On release the lock file is removed, and
        so are the directories this call created if nothing else was written to them.

        With `shard`, the lock is the shard's: writers of other shards may hold theirs
        at the same time (see the module docstring); a whole-run writer may not.
        """
        if self._writer_depth:
            self._writer_depth += 1
            try:
                yield self
            finally:
                self._writer_depth -= 1
            return
        created = _make_dirs(self.run_dir)
        if shard is None:
            try:
                fd = _acquire_lock(self.lock_path, self.run_dir)
            except RunDirBusyError:
                writers = self.shard_writers()
                if not writers:
                    raise
                raise RunDirBusyError(
                    f"{_describe_shard_writers(writers)} writing this run directory; wait "
                    "for them, evaluate with the same --shard I/K, or use another --out",
                    path=self.run_dir,
                ) from None
            self._writer_depth = 1
            try:
                yield self
            finally:
                self._writer_depth = 0
                _release_lock(fd, self.lock_path, created)
            return
        shared = _acquire_shared(self.lock_path, self.run_dir)
        try:
            own = _acquire_lock(
                self.shard_lock_path(shard),
                self.run_dir,
                what=f"shard {shard} of this run directory",
                patience=LOCK_PATIENCE_S,
            )
        except BaseException:
            _release_shared(shared, self.lock_path, [])
            raise
        self._writer_depth = 1
        try:
            yield self
        finally:
            self._writer_depth = 0
            try:
                _release_lock(own, self.shard_lock_path(shard), [])
            finally:
                _release_shared(shared, self.lock_path, created)

    def shard_writers(self) -> dict[str, LockHolder]:
        """Shard ('I/K') -> its writer, for every shard lock held now."""
        found: dict[str, LockHolder] = {}
        for path in sorted(self.run_dir.glob(f"{SHARD_LOCK_PREFIX}*")):
            spec = _shard_of_lock(path)
            if spec is None:
                continue
            holder = _held_by(path)
            if holder is not None:
                found[str(spec)] = holder
        return found

    def shard_lock_holders(self) -> dict[str, LockHolder]:
        """Shard ('I/K') -> who its lock file names, whether or not it is held now,
        without touching the locks (`curate status` must never make a starting
        writer see a busy lock). A writer killed by SIGKILL leaves its file behind:
        `LockHolder.alive` tells on the same host."""
        found: dict[str, LockHolder] = {}
        for path in sorted(self.run_dir.glob(f"{SHARD_LOCK_PREFIX}*")):
            spec = _shard_of_lock(path)
            if spec is None:
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                found[str(spec)] = _read_holder(fd)
            finally:
                os.close(fd)
        return found

    @contextlib.contextmanager
    def manifest_lock(self) -> Iterator[None]:
        """Exclusive for the moment shard writers check and write the manifest (blocks;
        held for milliseconds). The file stays: unlinking it would let two writers lock
        two different files."""

        try:
            fd = os.open(
                self.run_dir / MANIFEST_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666
            )
        except OSError as exc:
            raise InputError(
                f"cannot write to the run directory ({exc.strerror})", path=self.run_dir
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def writer_held(self) -> bool:
        """Whether this store object holds the writer lock now."""
        return self._writer_depth > 0

    # -- manifest ---------------------------------------------------------
    def read_manifest(self) -> dict[str, Any]:
        """The manifest, with the types of the fields curate reads checked."""
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("no manifest.json in run directory", path=self.run_dir) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"manifest is not valid JSON: {exc}", path=self.manifest_path) from exc
        except OSError as exc:
            raise InputError(
                f"cannot read manifest: {exc.strerror}", path=self.manifest_path
            ) from exc
        if not isinstance(data, dict):
            raise InputError("manifest is not a JSON object", path=self.manifest_path)
        problem = manifest_type_problem(data)
        if problem:
            raise InputError(f"manifest {problem}", path=self.manifest_path)
        return data

    def previous_manifest(self) -> dict[str, Any] | None:
        """The manifest a resume must match: None when there is none, or when the
        directory holds no rollout yet (a first attempt that failed before writing any
        fixes nothing, so it must not fix the settings either)."""
        if not self.exists() or not self.shard_paths():
            return None
        return self.read_manifest()

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        body = {"format_version": FORMAT_VERSION, **manifest}
        atomic_write_text(self.manifest_path, json.dumps(body, indent=2, sort_keys=True) + "\n")

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
        if _strictly_sorted(frame):
            return frame.drop("_shard", *extra)
        # Shards out of order: the sort is needed anyway, and once sorted the same
        # linear check proves the pairs distinct (cheaper than a group-by or a hash).
        frame = frame.sort("sample_id", "rollout_idx", "_shard")
        if _strictly_sorted(frame):
            return frame.drop("_shard", *extra)
        return _resolve_repeats(frame, shards, self.rollouts_dir).drop("_shard", *extra)

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


# -- the writer lock --------------------------------------------------------


def _make_dirs(path: Path) -> list[Path]:
    """mkdir -p `path`; returns the directories it created, deepest first."""
    created = []
    probe = path
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        created.append(probe)
        probe = probe.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError("exists and is not a directory", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot create the run directory: {exc.strerror}", path=path) from exc
    return created


def _acquire_lock(
    lock_path: Path,
    run_dir: Path,
    *,
    what: str = "this run directory",
    patience: float = 0.0,
) -> int:
    """An fd holding an exclusive flock on `lock_path`, which names the holder.

    A lock held by someone else is retried for `patience` seconds before the run is
    called busy (a shard lock may be held for an instant by a probe)."""
    fd = _flock_loop(
        lock_path,
        run_dir,
        shared=False,
        patience=patience,
        busy=lambda holder: (
            f"{holder.describe()} is writing {what}; wait for it or use another --out"
        ),
    )
    info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    return fd


def _acquire_shared(lock_path: Path, run_dir: Path) -> int:
    """An fd holding a shared flock on `lock_path` (RUN/.lock): shard writers share it,
    a whole-run writer holds it exclusively. Nothing is written into the file; a
    finishing shard writer holds it exclusively for an instant to remove it, hence the
    patience."""
    return _flock_loop(
        lock_path,
        run_dir,
        shared=True,
        patience=LOCK_PATIENCE_S,
        busy=lambda holder: (
            f"{holder.describe()} is writing this whole run directory "
            "(no --shard); wait for it or use another --out"
        ),
    )


def _flock_loop(
    lock_path: Path,
    run_dir: Path,
    *,
    shared: bool,
    patience: float,
    busy: Callable[[LockHolder], str],
) -> int:
    """Open `lock_path` and flock it (shared or exclusive) without blocking, retrying
    for `patience` seconds; RunDirBusyError with `busy(holder)` after that."""

    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = time.monotonic() + patience
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except FileNotFoundError:
            # A writer that just finished removed the directory it had created.
            _make_dirs(run_dir)
            continue
        except OSError as exc:
            raise InputError(
                f"cannot write to the run directory ({exc.strerror})", path=run_dir
            ) from exc
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise RunDirBusyError(busy(holder), path=run_dir) from None
        except OSError as exc:
            os.close(fd)
            raise RunError(
                f"cannot lock the run directory ({exc.strerror}); its file system may not "
                "support file locks",
                path=run_dir,
            ) from exc
        # A finishing writer unlinks the lock file while holding it: if we locked that
        # unlinked file, a third process may hold the new one. Lock what is there now.
        try:
            ours = os.fstat(fd)
            now = os.stat(lock_path)
            same = (ours.st_dev, ours.st_ino) == (now.st_dev, now.st_ino)
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        return fd


def _release_shared(fd: int, lock_path: Path, created: list[Path]) -> None:
    """Drop a shard writer's shared hold on RUN/.lock; the last one out removes it
    (and the directories its writer created, when empty). Linux drops the shared
    lock when the upgrade fails, which is what releasing wants anyway."""

    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # other shard writers still hold it
        _release_lock(fd, lock_path, created)
        fd = -1
    finally:
        if fd >= 0:
            os.close(fd)


def _shard_of_lock(path: Path) -> ShardSpec | None:
    """The shard a '.lock.shard-I-of-K' file locks (None: not such a name)."""
    index, _, count = path.name.removeprefix(SHARD_LOCK_PREFIX).partition("-of-")
    if not (index.isdigit() and count.isdigit()) or int(index) >= int(count):
        return None
    return ShardSpec(int(index), int(count))


def _held_by(path: Path) -> LockHolder | None:
    """Who holds the flock on `path` now (None: nobody). Probes with a shared lock for
    an instant, which a starting writer of that shard rides out (LOCK_PATIENCE_S)."""

    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        except OSError:
            return None
        return None
    finally:
        os.close(fd)


def _describe_shard_writers(writers: dict[str, LockHolder]) -> str:
    """'curate eval --shard writers (0/4: 123@host, 2/4: 456@host) are'."""
    listed = ", ".join(f"{shard}: {holder.where}" for shard, holder in writers.items())
    return f"curate eval --shard writers ({listed}) are"


def _read_holder(fd: int) -> LockHolder:
    """What the holder wrote into the lock file (fields it has not written yet: None)."""
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid, host, since = data.get("pid"), data.get("host"), data.get("since")
    return LockHolder(
        pid=pid if isinstance(pid, int) else None,
        host=host if isinstance(host, str) else None,
        since=float(since) if isinstance(since, int | float) else None,
    )


def _release_lock(fd: int, lock_path: Path, created: list[Path]) -> None:
    """Remove the lock file (still holding it, see _acquire_lock), then the directories
    the writer created if they stayed empty (a run that failed before writing)."""
    try:
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        for directory in created:
            try:
                directory.rmdir()
            except OSError:
                break
    finally:
        os.close(fd)


# -- manifest field types -----------------------------------------------------

# JSON type names, as a user editing the file knows them.
_JSON_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    dict: "an object",
    list: "an array",
    type(None): "null",
}
_STR, _INT, _NUM, _BOOL, _OBJ = (str,), (int,), (int, float), (bool,), (dict,)
_OPT_STR, _OPT_INT, _OPT_OBJ = (str, type(None)), (int, type(None)), (dict, type(None))
# The fields curate reads back, and the JSON types each may hold. Others pass unchecked.
MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "format_version": _INT,
    "model": _STR,
    "backend": _STR,
    "runs": _INT,
    "mode": _STR,
    "sampling": _OBJ,
    "seed": _INT,
    "grader": _STR,
    "dataset_path": _STR,
    "dataset_sha256": _STR,
    "dataset_split": _STR,
    "prompt_field": _OPT_STR,
    "messages_field": _OPT_STR,
    "answer_field": _OPT_STR,
    "id_field": _OPT_STR,
    "template": _OPT_STR,
    "system": _OPT_STR,
    "chat_template_sha256": _OPT_STR,
    "limit": _OPT_INT,
    "engine_options": _OBJ,
    "backend_info": _OBJ,
    "adaptive": _BOOL,
    "adaptive_policy": _OPT_OBJ,
    "adaptive_summary": _OPT_OBJ,
    "shards": _OPT_OBJ,
    "curate_version": _STR,
    "created_at": _STR,
    "updated_at": _STR,
}
SAMPLING_TYPES: dict[str, tuple[type, ...]] = {
    "temperature": _NUM,
    "top_p": _NUM,
    "max_tokens": _INT,
    "stop": (list,),
}


def manifest_type_problem(data: dict[str, Any]) -> str | None:
    """ "field 'runs' is a string, expected an integer" for the first field of `data`
    whose JSON type is wrong; None when every known field is well typed."""
    problem = _field_problems(data, MANIFEST_TYPES, "")
    if problem is None and isinstance(data.get("sampling"), dict):
        sampling = data["sampling"]
        problem = _field_problems(sampling, SAMPLING_TYPES, "sampling.")
        stop = sampling.get("stop")
        if problem is None and isinstance(stop, list) and not all(isinstance(s, str) for s in stop):
            problem = "field 'sampling.stop' holds a non-string, expected an array of strings"
    return problem


def _field_problems(
    data: dict[str, Any], types: dict[str, tuple[type, ...]], prefix: str
) -> str | None:
    for key, allowed in types.items():
        if key not in data:
            continue
        value = data[key]
        # JSON true/false load as bool, a subclass of int: not an integer here.
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
        if not ok:
            expected = " or ".join(_JSON_NAMES[t] for t in allowed)
            got = _JSON_NAMES.get(type(value), type(value).__name__)
            return f"field '{prefix}{key}' is {got}, expected {expected}"
    return None


# -- de-duplication -------------------------------------------------------------


def prefer_latest_scored(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (sample_id, rollout_idx): scored beats error, then later `_shard` wins."""
    import polars as pl

    return (
        frame.with_columns(pl.col("error").is_null().alias("_scored"))
        .sort(["sample_id", "rollout_idx", "_scored", "_shard"])
        .unique(subset=["sample_id", "rollout_idx"], keep="last", maintain_order=True)
        .drop("_scored")
    )


def _resolve_repeats(frame: pl.DataFrame, shards: list[Path], where: Path) -> pl.DataFrame:
    """One row per pair of `frame` (sorted by sample_id, rollout_idx, _shard), refusing
    conflicts. Repeats sit next to each other, so only they are grouped and sorted."""
    import polars as pl

    sid, rid = pl.col("sample_id"), pl.col("rollout_idx")
    same_prev = (sid == sid.shift(1)) & (rid == rid.shift(1))
    same_next = (sid == sid.shift(-1)) & (rid == rid.shift(-1))
    rows = frame.with_row_index("_row")
    repeated = rows.filter((same_prev | same_next).fill_null(False))
    _refuse_conflicts(repeated, shards, where)
    winners = prefer_latest_scored(repeated)["_row"]
    losers = repeated["_row"].filter(~repeated["_row"].is_in(winners.implode()))
    return rows.filter(~pl.col("_row").is_in(losers.implode())).drop("_row")


def _refuse_conflicts(frame: pl.DataFrame, shards: list[Path], where: Path) -> None:
    """InputError when a (sample_id, rollout_idx) has scored rows with different scores.

    A scored row replacing an error row (a resume re-trying a failed rollout) and an
    exact repeat are not conflicts. Only the repeated pairs are looked at.
    """
    import polars as pl

    scored = frame.filter(
        pl.struct("sample_id", "rollout_idx").is_duplicated() & pl.col("error").is_null()
    )
    conflicts = (
        scored.group_by("sample_id", "rollout_idx")
        .agg(
            pl.col("score").n_unique().alias("_scores"),
            pl.struct("_shard", "score").sort_by("_shard").alias("_rows"),
        )
        .filter(pl.col("_scores") > 1)
        .sort("sample_id", "rollout_idx")
    )
    if conflicts.height == 0:
        return
    first = conflicts.row(0, named=True)
    seen = ", ".join(f"{r['score']:g} in {shards[r['_shard']].name}" for r in first["_rows"])
    n_shards = conflicts["_rows"].explode().struct.field("_shard").n_unique()
    raise InputError(
        f"{conflicts.height} (sample_id, rollout_idx) pair(s) scored twice with different "
        f"scores, across {n_shards} shard(s): sample {first['sample_id']!r} run "
        f"{first['rollout_idx']} scored {seen}; two writers ran at once? Re-run with "
        "--force-new (or into another --out) to regenerate the run",
        path=where,
    )


def _strictly_sorted(frame: pl.DataFrame) -> bool:
    """True when (sample_id, rollout_idx) rises strictly row by row: sorted, no repeats."""
    import polars as pl

    sid, rid = pl.col("sample_id"), pl.col("rollout_idx")
    prev = sid.shift(1)
    rising = (pl.int_range(pl.len()) == 0) | (sid > prev) | ((sid == prev) & (rid > rid.shift(1)))
    return bool(frame.select(rising.fill_null(False).all()).item())


# The largest rollout_idx `run_bits` encodes as a bit of a UInt64.
MAX_BIT_RUN_IDX = 63


def run_bits() -> pl.Expr:
    """2**rollout_idx per row as UInt64, null for a rollout_idx outside 0..63 (or null).

    Summed over one sample's rows it has exactly one set bit per row iff no rollout_idx
    repeats: a repeat carries (and a UInt64 wrap-around only drops bits), and a null
    leaves a bit short. So `bits.sum().bitwise_count_ones() == len()` per sample proves
    the (sample_id, rollout_idx) pairs distinct with a group-by on sample_id alone.
    """
    import polars as pl

    rid = pl.col("rollout_idx")
    bit = pl.lit(2, dtype=pl.UInt64).pow(rid.clip(0, MAX_BIT_RUN_IDX).cast(pl.UInt32))
    return pl.when(rid.is_between(0, MAX_BIT_RUN_IDX)).then(bit)


def pairs_distinct(frame: pl.DataFrame) -> bool:
    """True when no (sample_id, rollout_idx) pair of `frame` repeats, proved with `run_bits`
    (several times cheaper than hashing every pair); False means "not proved"."""
    import polars as pl

    sums = (
        frame.lazy()
        .group_by("sample_id")
        .agg(pl.len().alias("rows"), run_bits().sum().alias("bits"))
        .collect()
    )
    return bool(sums.select((pl.col("bits").bitwise_count_ones() == pl.col("rows")).all()).item())
