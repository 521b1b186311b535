"""Run one untrusted program against its tests, fenced in: the code grader's sandbox,
curate's side. The inside (the box server, the boxes, the judge, the program runner and
the plain-data channel) is `curate.graders.boxserver`, a script started with the
interpreter that runs the programs (curate's own unless the user names one).

A warm server per concurrent run does the expensive set-up once (a network namespace with
no interface up, a mount namespace with two read-only roots: the program's, holding the
system directories and the standard library with every package directory covered, plus
the packages opted in (`visible_packages`); the judge's, holding the system and the
interpreter's prefixes whole; a cgroup per role, the common modules imported); each test
case is then two forks of it (`run_program`):

* with a `judge` spec (every layout but stdin/stdout) the tests run in a judge box and the
  program in its own box; the judge calls the program's functions over a socket carrying
  plain data (JSON), compares in its own interpreter and writes the verdict on a pipe the
  program never holds. The program cannot reach the verdict: not by exiting, not through
  frames, trace hooks, objects with a rigged ``__eq__`` or names of the harness;
* without (stdin/stdout), the program box alone; curate compares its stdout.

Each box: its own PID namespace (its /proc, no view of the host's processes; everything in
it dies with its pid 1), mount namespace (an empty size-limited tmpfs as /tmp, /var/tmp and
/dev/shm: the disk quota; no data set, run directory, home or other box in view), IPC
namespace, a uid of its own (a neighbour's fork hog cannot use up its processes), a
cgroup (memory and processes counted for the whole program, children included), rlimits
(CPU, address space, file size, processes, no core), a seccomp filter, no environment
but PATH/LANG/HOME, and a wall clock. What the machine does not allow is probed once and
named in `Protection.summary` (the ``code sandbox:`` start line); the rest still applies.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

BOXSERVER = Path(__file__).with_name("boxserver.py")
# The server's code reaches it through a descriptor and runs under a neutral file name: no
# path of curate's checkout in a box's tracebacks, code objects or command lines.
_LOADER = (
    "import os, sys, __main__\n"
    "fd = int(sys.argv[2])\n"
    "code = os.pread(fd, 1 << 24, 0)\n"
    "os.close(fd)\n"
    "exec(compile(code, 'boxserver.py', 'exec'), __main__.__dict__)\n"
)

# Status of one run, as the code grader reports it per test case.
Status = Literal["ok", "error", "assertion", "timeout", "limit", "crashed", "tampered", "harness"]

# Exit codes of a stdin/stdout program's runner (see boxserver.run_stdio).
_EXIT_ASSERTION = 3
_EXIT_MEMORY = 4
_EXIT_HARNESS = 97
# Directories every box sees, read-only (with the interpreter's prefixes).
SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin")
# Extra seconds the server gets beyond a case's wall clock to kill and reap.
_GRACE_S = 30.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What one program may use. `cpu_s` defaults to the wall clock plus one second;
    `disk_mb` is its /tmp, /var/tmp and /dev/shm together."""

    wall_s: float = 10.0
    memory_mb: int = 1024
    nproc: int = 64
    fsize_mb: int = 16
    output_bytes: int = 1 << 20
    cpu_s: int | None = None
    disk_mb: int = 64

    def cpu_seconds(self) -> int:
        return self.cpu_s if self.cpu_s is not None else max(1, math.ceil(self.wall_s)) + 1

    def summary(self) -> str:
        return (
            f"{self.wall_s:g}s wall, {self.cpu_seconds()}s CPU, {self.memory_mb} MB memory, "
            f"{self.nproc} processes, {self.fsize_mb} MB files, {self.disk_mb} MB /tmp"
        )


@dataclass(frozen=True, slots=True)
class Protection:
    """What isolation this machine gives a program (see the module docstring)."""

    network: bool
    pid: bool
    mount: bool = False
    uid: bool = False  # a uid of its own per box (needs root)
    cgroup: int = 0  # 2 or 1: the cgroup version counting memory and processes; 0: none
    seccomp: bool = False
    user_namespace: bool = False  # the namespaces live in a user namespace (not root)
    reason: str = ""  # why a protection is missing, when one is
    python: str = ""  # the interpreter that runs programs ("": curate's own)
    packages: tuple[str, ...] = ()  # third-party packages the program sees ("site": all)

    @property
    def summary(self) -> str:
        parts = [
            "no network (own network namespace)"
            if self.network
            else "NETWORK NOT ISOLATED (no network namespace)",
            "own PID namespace and /proc" if self.pid else "no PID namespace",
            "own mount namespace (read-only system, empty /tmp /var/tmp /dev/shm)"
            if self.mount
            else "NO MOUNT NAMESPACE (the program sees the host's files)",
            "a uid of its own"
            if self.uid
            else "as curate's own user in a user namespace, no capabilities"
            if self.user_namespace
            else "as curate's own user",
            f"cgroup v{self.cgroup} memory+pids"
            if self.cgroup
            else "no cgroup (per-process limits)",
            "seccomp filter" if self.seccomp else "no seccomp",
            f"python {self.python or sys.executable}",
            visible_packages(self.python, self.packages).summary
            if self.mount
            else "the program imports the standard library only (its files are all in view)",
        ]
        text = ", ".join(parts)
        return f"{text} ({self.reason})" if self.reason else text

    def wire(self) -> dict[str, object]:
        return {
            "network": self.network,
            "pid": self.pid,
            "mount": self.mount,
            "uid": self.uid,
            "cgroup": self.cgroup,
            "seccomp": self.seccomp,
        }


NO_PROTECTION = Protection(network=False, pid=False)


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one run ended. `completed`: the judge saw every test pass (or, for a
    stdin/stdout program, it ended normally)."""

    status: Status
    stdout: str
    stderr: str
    exit_code: int | None
    seconds: float
    completed: bool
    detail: str = ""  # one line for the verdict


def python_executable() -> str:
    return sys.executable or "python3"


def minimal_env() -> dict[str, str]:
    """The program's whole environment: never a key, never anything of the parent's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }


# -- the warm servers ----------------------------------------------------------------------


class BoxServer:
    """One box server process (`curate.graders.boxserver`), serving one run at a time."""

    def __init__(self, python: str, packages: tuple[str, ...] = ()) -> None:
        view = visible_packages(python, packages)  # before the server: UsageError first
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = _memfd("boxserver", BOXSERVER.read_bytes())
        try:
            # -S: no site-packages on the programs' path and no .pth file run in their
            # interpreter (the server is forked for each box); judges add them on demand.
            self.process = subprocess.Popen(
                [python, "-I", "-S", "-c", _LOADER, str(theirs.fileno()), str(code)],
                pass_fds=(theirs.fileno(), code),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None if os.environ.get("CURATE_DEBUG") else subprocess.DEVNULL,
                env=minimal_env(),
                cwd="/",
                start_new_session=True,  # Ctrl-C is curate's to handle
                close_fds=True,
            )
        finally:
            theirs.close()
            os.close(code)
        self.socket = ours
        setup = {
            "op": "setup",
            "roots": visible_dirs(python),
            "system": [p for p in SYSTEM_DIRS if os.path.lexists(p)],
            "program": view.wire(),
        }
        self.features = self.request(setup, [], 120.0)

    def request(self, message: dict[str, Any], fds: list[int], timeout_s: float) -> dict[str, Any]:
        self.socket.settimeout(timeout_s)
        socket.send_fds(self.socket, [json.dumps(message).encode()], fds)
        data = self.socket.recv(1 << 20)
        if not data:
            raise OSError("the sandbox server ended")
        reply = json.loads(data)
        if not isinstance(reply, dict):
            raise OSError("the sandbox server sent no reply")
        return reply

    def close(self) -> None:
        """Closing the socket ends the server, and with it every box."""
        self.socket.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


class ServerPool:
    """Idle warm servers for one interpreter; as many as runs have been concurrent."""

    def __init__(self, python: str, packages: tuple[str, ...] = ()) -> None:
        self.python = python
        self.packages = packages
        self.idle: list[BoxServer] = []
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def server(self) -> Iterator[BoxServer]:
        with self.lock:
            server = self.idle.pop() if self.idle else None
        if server is None:
            server = BoxServer(self.python, self.packages)
        try:
            yield server
        except BaseException:
            server.close()  # a server in an unknown state is not reused
            raise
        with self.lock:
            self.idle.append(server)

    def close(self) -> None:
        with self.lock:
            servers, self.idle = self.idle, []
        for server in servers:
            server.close()


_POOLS: dict[tuple[str, tuple[str, ...]], ServerPool] = {}
_POOLS_LOCK = threading.Lock()


def server_pool(python: str = "", packages: tuple[str, ...] = ()) -> ServerPool:
    """The warm servers for an interpreter and the packages its programs see."""
    key = (python or python_executable(), packages)
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = ServerPool(*key)
        return _POOLS[key]


@atexit.register
def close_servers() -> None:
    """Stop every warm server (and their boxes); they also stop if curate is killed."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    for pool in pools:
        pool.close()


@functools.cache
def visible_dirs(python: str) -> list[str]:
    """What a box sees: the system directories and the interpreter's prefixes (its
    standard library and, for a virtual environment, its packages), nothing nested twice."""
    if os.path.realpath(python) == os.path.realpath(python_executable()):
        prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    else:
        shown = subprocess.run(
            [python, "-I", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        prefixes = shown.stdout.split()
        prefixes.append(str(Path(os.path.realpath(python)).parent.parent))
    dirs: list[str] = []
    for path in [*SYSTEM_DIRS, *(os.path.abspath(p) for p in prefixes)]:
        if not os.path.lexists(path) or path in dirs:
            continue
        if any(
            path.startswith(other.rstrip("/") + "/") for other in dirs if not os.path.islink(other)
        ):
            continue
        dirs = [d for d in dirs if not d.startswith(path.rstrip("/") + "/")]
        dirs.append(path)
    return dirs


# What the program sees of the interpreter's third-party packages: nothing by default; the
# packages named with the grader's ``packages=`` key (their top-level directories and
# files, found in their RECORD, and those of what they require), or all (``site``).
_PACKAGES_SCRIPT = r"""
import importlib.metadata as md, importlib.util, json, os, re, site, sys
names = sys.argv[1:]
sites = [os.path.abspath(p) for p in site.getsitepackages() if os.path.isdir(p)]
out = {"paths": [], "sitedirs": [], "named": [], "required": [], "missing": []}
if "site" in names:
    out["paths"], out["sitedirs"] = sites, sites
    names = []
seen, todo = set(), [(name, True) for name in names]
while todo:
    name, named = todo.pop(0)
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        continue
    seen.add(key)
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        owners = md.packages_distributions().get(name) or []
        dist = md.distribution(owners[0]) if owners else None
    if dist is None:
        if named:
            out["missing"].append(name)
        continue
    base = os.path.abspath(str(dist.locate_file("")))
    tops = sorted({f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."})
    paths = [os.path.join(base, t) for t in tops if t != "__pycache__" and not t.endswith(".pth")]
    paths = [p for p in paths if os.path.lexists(p)]
    modules = [p for p in paths if os.path.isdir(p) and not p.endswith((".dist-info", ".egg-info"))
               or p.endswith((".py", ".so"))]
    if not modules or all(os.path.basename(p).startswith("__editable__") for p in modules):
        # an editable install: its RECORD holds a finder; the code lives elsewhere
        imports = (dist.read_text("top_level.txt") or "").split() or [name.replace("-", "_")]
        for top in imports:
            spec = importlib.util.find_spec(top)
            if spec is None:
                continue
            found = list(spec.submodule_search_locations or []) or [spec.origin or ""]
            for path in found:
                if path and os.path.exists(path):
                    paths.append(path)
                    out["sitedirs"].append(os.path.dirname(path))
    out["paths"] += paths
    out["sitedirs"].append(base)
    (out["named"] if named else out["required"]).append(dist.metadata["Name"])
    for requirement in dist.requires or []:
        if "extra" in requirement.partition(";")[2]:
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if match:
            todo.append((match[1], False))
out["sitedirs"] = list(dict.fromkeys(out["sitedirs"]))
print(json.dumps(out))
"""


class PackageError(Exception):
    """A package named with ``packages=`` is not installed for the interpreter."""


@dataclass(frozen=True, slots=True)
class PackageView:
    """The third-party files a program box holds (see `visible_packages`)."""

    asked: tuple[str, ...]
    paths: tuple[str, ...] = ()  # top-level directories and files, bound read-only
    sitedirs: tuple[str, ...] = ()  # added to the program's sys.path
    named: tuple[str, ...] = ()  # distributions, as named
    required: tuple[str, ...] = ()  # distributions they require

    @property
    def everything(self) -> bool:
        return "site" in self.asked

    @property
    def summary(self) -> str:
        if self.everything:
            return "the program sees the standard library and every installed package"
        if not self.named:
            return "the program sees the standard library only (packages=NAME,... to add)"
        text = f"the program sees the standard library and {', '.join(self.named)}"
        if self.required:
            text += f" (with {', '.join(self.required)}: what they require)"
        return text

    def wire(self) -> dict[str, object]:
        return {
            "packages": list(self.paths),
            "sitedirs": list(self.sitedirs),
            "site": self.everything,
        }


@functools.cache
def visible_packages(python: str, packages: tuple[str, ...]) -> PackageView:
    """The files of `packages` (distribution or import names, or ``site``) installed for
    `python`: what a program box holds beyond the standard library. `PackageError` when
    one is not installed."""
    if not packages:
        return PackageView(())
    shown = subprocess.run(
        [python or python_executable(), "-I", "-c", _PACKAGES_SCRIPT, *packages],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
    )
    try:
        found = json.loads(shown.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise PackageError(f"cannot list the packages of {python}: {shown.stderr[-200:]}") from None
    scratch = [p for p in found["paths"] if p.startswith(("/tmp/", "/var/tmp/", "/dev/shm/"))]
    if scratch:  # a box's own empty /tmp, /var/tmp and /dev/shm would cover them
        raise PackageError(f"{scratch[0]} is in a scratch directory, which a box cannot show")
    if found["missing"]:
        raise PackageError(
            f"not installed for {python or python_executable()}: {', '.join(found['missing'])}"
        )
    return PackageView(
        packages,
        tuple(dict.fromkeys(found["paths"])),
        tuple(found["sitedirs"]),
        tuple(found["named"]),
        tuple(found["required"]),
    )


# -- one run ---------------------------------------------------------------------------------


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(f"curate-{name}")
    if data:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_memfd(fd: int, limit: int) -> tuple[bytes, int]:
    size = os.fstat(fd).st_size
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, min(limit, size)) if size else b"", size


def run_program(
    source: str,
    *,
    stdin: str = "",
    limits: Limits = Limits(),
    judge: dict[str, Any] | None = None,
    protection: Protection | None = None,
) -> RunResult:
    """Run `source` in a box; with `judge` (a spec of the tests, see
    `boxserver.judge`) the tests run in a judge box of their own and decide. Never raises
    for what the program does (a harness failure is status ``harness``)."""
    fence = protection if protection is not None else protection_available()
    message = {
        "op": "run",
        "kind": "split" if judge is not None else "stdio",
        "fence": fence.wire(),
        "wall_s": limits.wall_s,
        "cpu_s": limits.cpu_seconds(),
        "memory_mb": limits.memory_mb,
        "nproc": limits.nproc,
        "fsize_mb": limits.fsize_mb,
        "disk_mb": limits.disk_mb,
        "env": minimal_env(),
    }
    fds = [
        _memfd("program", source.encode("utf-8", "surrogatepass")),
        _memfd("stdin", stdin.encode("utf-8", "surrogatepass")),
        _memfd("stdout"),
        _memfd("stderr"),
    ]
    if judge is not None:
        fds += [_memfd("tests", json.dumps(judge).encode()), _memfd("judge-stderr")]
    try:
        try:
            with server_pool(fence.python, fence.packages).server() as server:
                reply = server.request(message, fds, limits.wall_s + _GRACE_S)
        except (OSError, ValueError) as exc:
            return RunResult("harness", "", "", None, 0.0, False, f"sandbox: {exc}")
        stdout, _ = _read_memfd(fds[2], limits.output_bytes)
        stderr, stderr_size = _read_memfd(fds[3], limits.output_bytes)
        judge_err = _read_memfd(fds[5], 4000)[0] if judge is not None else b""
    finally:
        for fd in fds:
            os.close(fd)
    return classify(reply, stdout, stderr, stderr_size, judge_err, limits)


def _status(line: str) -> tuple[str, int | None]:
    word, _, rest = str(line).partition(" ")
    number = int(rest) if rest.strip().isdigit() else None
    return word, number


def _short(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return _short(lines[-1]) if lines else ""


def classify(
    reply: dict[str, Any],
    stdout_bytes: bytes,
    stderr_bytes: bytes,
    stderr_size: int,
    judge_err: bytes,
    limits: Limits,
) -> RunResult:
    """The server's reply as a `RunResult` (one rule for every layout)."""
    stdout = stdout_bytes.decode("utf-8", errors="replace")
    stderr = stderr_bytes.decode("utf-8", errors="replace")
    seconds = float(reply.get("seconds", 0.0))
    word, number = _status(reply.get("program", ""))
    exit_code = number if word == "exit" else None

    def result(status: Status, detail: str, completed: bool = False) -> RunResult:
        return RunResult(status, stdout, stderr, exit_code, seconds, completed, detail)

    if "error" in reply:
        return result("harness", f"sandbox: {reply['error']}")
    if word == "harness":
        return result("harness", _short(reply.get("program", "")))
    verdict = reply.get("verdict")
    split = "judge" in reply
    if split and isinstance(verdict, dict) and verdict.get("verdict") == "passed":
        return result("ok", "", True)
    if reply.get("program_oom"):
        return result("limit", f"memory limit {limits.memory_mb} MB (the program and its children)")
    if reply.get("timed_out"):
        return result("timeout", f"wall-clock deadline {limits.wall_s:g}s")
    if word == "signal" and number is not None:
        name = _signal_name(number)
        if number == signal.SIGXCPU:
            return result("timeout", f"CPU limit {limits.cpu_seconds()}s ({name})")
        if number == signal.SIGXFSZ:
            return result("limit", f"file size limit {limits.fsize_mb} MB ({name})")
    if stderr_size >= limits.fsize_mb * 1024 * 1024:
        return result("limit", f"stderr flood ({stderr_size // 1024} KB before the limit)")
    if split:
        return _judged(verdict, word, number, reply, judge_err, result, limits)
    if word == "signal" and number is not None:
        return result("crashed", f"killed by {_signal_name(number)}")
    if exit_code == 0:
        return result("ok", "", True)
    if exit_code == _EXIT_ASSERTION:
        return result("assertion", _last_line(stderr) or "AssertionError")
    if exit_code == _EXIT_MEMORY:
        return result("limit", f"memory limit {limits.memory_mb} MB (MemoryError)")
    if exit_code == _EXIT_HARNESS:
        return result("harness", _last_line(stderr) or "the sandbox could not start")
    last = _last_line(stderr)
    limited = _limit_detail(last, reply, limits)
    if limited:
        return result("limit", limited)
    return result("error", last or f"exit code {exit_code}")


def _judged(
    verdict: Any,
    word: str,
    number: int | None,
    reply: dict[str, Any],
    judge_err: bytes,
    result: Any,
    limits: Limits,
) -> RunResult:
    if not isinstance(verdict, dict):
        judge_status = reply.get("judge", "")
        text = _last_line(judge_err.decode("utf-8", "replace")) or judge_status
        if reply.get("judge_oom"):
            text = f"the judge ran out of memory ({limits.memory_mb} MB)"
        return result("harness", f"the judge gave no verdict: {text}")  # type: ignore[no-any-return]
    kind = str(verdict.get("verdict"))
    detail = _short(str(verdict.get("detail", "")))
    if kind == "failed":
        return result("assertion", detail or "AssertionError")  # type: ignore[no-any-return]
    if kind == "tampered":
        return result("tampered", detail)  # type: ignore[no-any-return]
    if kind == "harness":
        return result("harness", detail)  # type: ignore[no-any-return]
    limited = _limit_detail(detail, reply, limits)
    if limited:
        return result("limit", limited)  # type: ignore[no-any-return]
    if kind == "gone" and word == "exit" and number == 0:
        return result("assertion", "the program exited before its tests finished")  # type: ignore[no-any-return]
    if kind == "gone" and word == "signal" and number is not None:
        detail = f"{detail} (killed by {_signal_name(number)})"
    elif kind == "gone" and word == "exit" and number is not None:
        detail = f"{detail} (exit code {number})"
    return result("crashed", detail)  # type: ignore[no-any-return]


def _limit_detail(detail: str, reply: dict[str, Any], limits: Limits) -> str:
    """The limit a failure's last line (or the cgroup's counters) points to, or ""."""
    if reply.get("program_fork_limit") or any(
        sign in detail
        for sign in (
            "BlockingIOError",
            "Resource temporarily unavailable",
            "can't start new thread",
        )
    ):
        return f"process limit {limits.nproc}" + (f": {detail}" if detail else "")
    if "MemoryError" in detail:
        return f"memory limit {limits.memory_mb} MB (MemoryError)"
    if "File too large" in detail or "No space left on device" in detail:
        sizes = f"{limits.fsize_mb} MB a file, {limits.disk_mb} MB /tmp"
        return f"file size or disk limit ({sizes}): {detail}"
    return ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# -- what this machine allows ------------------------------------------------------------


# Modules solutions commonly import must load; then the network must be cut.
_PROBE = (
    "import collections, fractions, functools, heapq, itertools, json, math, re, socket\n"
    "import typing\n"
    "s = socket.socket()\n"
    "s.settimeout(1)\n"
    "print(s.connect_ex(('127.0.0.1', 9)))\n"
)


def without(fence: Protection, name: str) -> Protection:
    """`fence` with the protection `name` turned off."""
    off: dict[str, Any] = {name: 0 if name == "cgroup" else False}
    return replace(fence, **off)


@functools.cache
def protection_available(python: str = "", packages: tuple[str, ...] = ()) -> Protection:
    """The strongest fence that works here, found once per process, interpreter and set
    of packages: the server's set-up says what the kernel gave it; a probe program then
    runs under it, and each protection that makes it fail is dropped (with the reason).
    `PackageError` when a package named in `packages` is not installed."""
    try:
        with server_pool(python, packages).server() as server:
            features = server.features
    except (OSError, ValueError) as exc:
        return replace(
            NO_PROTECTION,
            python=python,
            packages=packages,
            reason=f"the sandbox server fails: {exc}",
        )
    reasons = [f"{name}: {why}" for name, why in dict(features.get("reasons", {})).items()]
    fence = Protection(
        network=bool(features.get("network")),
        pid=bool(features.get("pid")),
        mount=bool(features.get("mount")),
        uid=bool(features.get("uid")),
        cgroup=int(features.get("cgroup", 0)),
        seccomp=bool(features.get("seccomp")),
        user_namespace=bool(features.get("user_namespace")),
        python=python,
        packages=packages,
    )
    order = ("seccomp", "cgroup", "uid", "mount", "pid")
    limits = Limits(wall_s=20.0)
    while True:
        outcome = run_program(_PROBE, limits=limits, protection=fence)
        if outcome.status == "ok" and outcome.completed:
            if fence.network and outcome.stdout.strip() == "0":
                reasons.append("a network namespace did not cut the network")
                fence = replace(fence, network=False)
            return replace(fence, reason="; ".join(reasons))
        active = [name for name in order if getattr(fence, name)]
        if not active:
            reasons.append(f"the probe fails: {outcome.detail or outcome.status}")
            return replace(fence, reason="; ".join(reasons))
        dropped = active[0]
        reasons.append(f"{dropped}: the probe fails with it ({outcome.detail or outcome.status})")
        fence = without(fence, dropped)
