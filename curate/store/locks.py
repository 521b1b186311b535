"""The run directory's locks: one writer at a time, or K shard writers side by side.

A whole-run writer holds an exclusive `flock` on RUN/.lock for its writing session, so
a second `curate eval` on the same directory is refused instead of writing every
rollout a second time. Array jobs (`--shard I/K`) write disjoint samples, so K of them
may write at once: each holds a *shared* flock on RUN/.lock (which keeps a whole-run
writer out, and is refused while one writes) and an exclusive flock on its own
RUN/.lock.shard-I-of-K (which refuses a second writer of the same shard). Shard
writers check and update the manifest under RUN/.manifest.lock, so the first one's
settings bind the others.

The OS drops a flock when its holder dies, even by SIGKILL, so a lock never goes stale;
each lock file names its holder (pid, host, start time) for the refusal's message.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from curate.core.shards import ShardSpec
from curate.errors import InputError, RunError

LOCK_FILE = ".lock"
SHARD_LOCK_PREFIX = ".lock.shard-"  # + "I-of-K"
MANIFEST_LOCK_FILE = ".manifest.lock"
# How long a shard writer retries a lock held for a moment by a finishing writer (or a
# `curate status` probe) before it calls the run busy.
LOCK_PATIENCE_S = 1.0


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


def shard_lock_path(run_dir: Path, shard: ShardSpec) -> Path:
    """RUN/.lock.shard-I-of-K: the lock of one shard's writer."""
    return run_dir / f"{SHARD_LOCK_PREFIX}{shard.key}"


@contextlib.contextmanager
def hold_writer_lock(run_dir: Path, shard: ShardSpec | None = None) -> Iterator[None]:
    """Hold the writer lock of `run_dir` (whole-run, or `shard`'s) until the block ends.

    Creates the directory if needed. A second writer gets RunDirBusyError naming the
    holder. On release the lock file is removed, and so are the directories this call
    created if nothing else was written to them. With `shard`, writers of other shards
    may hold theirs at the same time (see the module docstring); a whole-run writer may
    not.
    """
    lock_path = run_dir / LOCK_FILE
    created = _make_dirs(run_dir)
    if shard is None:
        try:
            fd = _acquire_lock(lock_path, run_dir)
        except RunDirBusyError:
            writers = shard_writers(run_dir)
            if not writers:
                raise
            raise RunDirBusyError(
                f"{_describe_shard_writers(writers)} writing this run directory; wait "
                "for them, evaluate with the same --shard I/K, or use another --out",
                path=run_dir,
            ) from None
        try:
            yield
        finally:
            _release_lock(fd, lock_path, created)
        return
    shared = _acquire_shared(lock_path, run_dir)
    own_path = shard_lock_path(run_dir, shard)
    try:
        own = _acquire_lock(
            own_path,
            run_dir,
            what=f"shard {shard} of this run directory",
            patience=LOCK_PATIENCE_S,
        )
    except BaseException:
        _release_shared(shared, lock_path, [])
        raise
    try:
        yield
    finally:
        try:
            _release_lock(own, own_path, [])
        finally:
            _release_shared(shared, lock_path, created)


def shard_writers(run_dir: Path) -> dict[str, LockHolder]:
    """Shard ('I/K') -> its writer, for every shard lock held now."""
    found: dict[str, LockHolder] = {}
    for path in sorted(run_dir.glob(f"{SHARD_LOCK_PREFIX}*")):
        spec = _shard_of_lock(path)
        if spec is None:
            continue
        holder = _held_by(path)
        if holder is not None:
            found[str(spec)] = holder
    return found


def shard_lock_holders(run_dir: Path) -> dict[str, LockHolder]:
    """Shard ('I/K') -> who its lock file names, whether or not it is held now,
    without touching the locks (`curate status` must never make a starting writer
    see a busy lock). A writer killed by SIGKILL leaves its file behind:
    `LockHolder.alive` tells on the same host."""
    found: dict[str, LockHolder] = {}
    for path in sorted(run_dir.glob(f"{SHARD_LOCK_PREFIX}*")):
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
def hold_manifest_lock(run_dir: Path) -> Iterator[None]:
    """Exclusive for the moment shard writers check and write the manifest (blocks;
    held for milliseconds). The file stays: unlinking it would let two writers lock
    two different files."""
    import fcntl

    try:
        fd = os.open(run_dir / MANIFEST_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise InputError(
            f"cannot write to the run directory ({exc.strerror})", path=run_dir
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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
    import fcntl

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
    import fcntl

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
    import fcntl

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
