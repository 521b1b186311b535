"""Run one untrusted Python program in its own process, fenced in: the code grader's
sandbox.

Each run gets a fresh interpreter (``python -I``: no PYTHONPATH, no user site, no
current directory on ``sys.path``) started in its own session, with

* resource limits: RLIMIT_CPU (seconds of CPU), RLIMIT_AS (address space), RLIMIT_NPROC
  (processes), RLIMIT_FSIZE (bytes a file may grow to, stdout included: it is a file),
  RLIMIT_CORE = 0;
* a wall-clock deadline, after which the whole process group is killed (SIGKILL);
* an empty temporary working directory, removed afterwards with everything in it;
* a minimal environment (PATH, LANG, HOME=the working directory): nothing of the
  parent's, so no API key;
* stdout and stderr written to files, of which at most `output_bytes` are read back;
* where the machine allows it (probed once per process, `protection()`): a new network
  namespace (only a loopback interface that is down: no connection leaves, not even to
  127.0.0.1 of the host), a new PID namespace (the program cannot see or signal the
  host's processes, and every process it starts dies with it, even one that calls
  setsid), and, when curate runs as root, the program runs as the unprivileged user
  ``nobody`` (so it cannot delete or read the host's files, and RLIMIT_NPROC, which
  does not bind root, applies). Without root, a user namespace provides the network and
  PID namespaces when the kernel allows unprivileged ones. Where none is available the
  program runs with the limits, the environment and the deadline only, and
  `Protection.summary` says so.

The program cannot fake a pass by exiting early: the bootstrap writes a random token,
read from a file the program cannot read, to a descriptor only after the program (and
its tests) returned normally. This guards against accidents and casual reward hacks,
not against a program written to inspect the bootstrap's own frames.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

# Who runs the program when curate is root (the conventional unprivileged account).
NOBODY = 65534

# Status of one run, as the code grader reports it per test case.
Status = Literal["ok", "error", "assertion", "timeout", "limit", "crashed", "harness"]

# Exit codes the bootstrap uses to say why the program stopped (see _BOOTSTRAP).
_EXIT_ASSERTION = 3
_EXIT_MEMORY = 4
_EXIT_EARLY = 5
_EXIT_HARNESS = 97

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWPID = 0x20000000

# The program's process: sets up the fence, then runs the source read from argv's
# config. Process tree with a PID namespace: this process (host pid) -> pid 1 of the new
# namespace (a reaper that waits, then reports the status on fd 4) -> pid 2 (the
# program). Pid 1 of a namespace ignores signals whose action is the default, so the
# program must not be pid 1: RLIMIT_CPU's SIGXCPU would not stop it.
_BOOTSTRAP = r"""
import ctypes, json, os, resource, signal, sys, traceback
def run(cfg):
    with open(cfg["program"], encoding="utf-8", errors="replace") as f:
        source = f.read()
    token = b""
    if cfg.get("token_file"):
        with open(cfg["token_file"], "rb") as f:
            token = f.read()
        os.unlink(cfg["token_file"])
    flags = cfg["unshare"]
    if flags:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(flags) != 0:
            os.write(2, b"sandbox: unshare failed: " + os.strerror(ctypes.get_errno()).encode())
            os._exit(97)
    def report(text):
        try:
            os.write(cfg["status_fd"], text.encode())
        except OSError:
            pass
    if cfg["pidns"]:
        # This process stays in the host's namespace; its child is pid 1 of the new one.
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 98)
        pid = os.fork()
        if pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            while True:
                done, status = os.waitpid(-1, 0)  # reap orphans too, until the program ends
                if done == pid:
                    break
            if os.WIFSIGNALED(status):
                report("signal %d\n" % os.WTERMSIG(status))
                os._exit(98)
            code = os.WEXITSTATUS(status)
            report("exit %d\n" % code)
            os._exit(code)
    os.close(cfg["status_fd"])
    os.chdir(cfg["workdir"])
    mb = 1024 * 1024
    for name, soft, hard in (
        ("RLIMIT_CPU", cfg["cpu_s"], cfg["cpu_s"] + 1),
        ("RLIMIT_AS", cfg["memory_mb"] * mb, cfg["memory_mb"] * mb),
        ("RLIMIT_FSIZE", cfg["fsize_mb"] * mb, cfg["fsize_mb"] * mb),
        ("RLIMIT_NPROC", cfg["nproc"], cfg["nproc"]),
        ("RLIMIT_CORE", 0, 0),
    ):
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if cfg["uid"] is not None:
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
    del cfg["token_file"]
    main = {"__name__": "__main__", "__builtins__": __builtins__}
    sys.argv = ["main.py"]
    code = 0
    try:
        exec(compile(source, "main.py", "exec"), main)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 0 and cfg["mode"] == "script":
            code = 5  # a test script that exits before its end did not run its tests
    except AssertionError:
        traceback.print_exc()
        code = 3
    except MemoryError:
        traceback.print_exc(limit=3)
        code = 4
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 1
    if code == 0 and token:
        try:
            os.write(cfg["token_fd"], token)
        except OSError:
            pass
    os._exit(code & 0xFF)
run(json.loads(sys.argv[1]))
"""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one program may use. `cpu_s` defaults to the wall clock plus one second."""

    wall_s: float = 10.0
    memory_mb: int = 1024
    nproc: int = 64
    fsize_mb: int = 16
    output_bytes: int = 1 << 20
    cpu_s: int | None = None

    def cpu_seconds(self) -> int:
        return self.cpu_s if self.cpu_s is not None else max(1, math.ceil(self.wall_s)) + 1

    def summary(self) -> str:
        return (
            f"{self.wall_s:g}s wall, {self.cpu_seconds()}s CPU, {self.memory_mb} MB memory, "
            f"{self.nproc} processes, {self.fsize_mb} MB files"
        )


@dataclass(frozen=True, slots=True)
class Protection:
    """What isolation this machine gives a program (see the module docstring)."""

    network: bool
    pid: bool
    uid: int | None  # the unprivileged user the program runs as; None: curate's own
    user_namespace: bool
    reason: str = ""  # why a protection is missing, when one is
    python: str = ""  # the interpreter that runs programs ("": this process's own)

    @property
    def unshare_flags(self) -> int:
        flags = _CLONE_NEWNET if self.network else 0
        flags |= _CLONE_NEWPID if self.pid else 0
        return flags | (_CLONE_NEWUSER if self.user_namespace else 0)

    @property
    def summary(self) -> str:
        parts = [
            "no network (own network namespace)"
            if self.network
            else "NETWORK NOT ISOLATED (no network namespace)",
            "own PID namespace" if self.pid else "no PID namespace",
        ]
        if self.uid is not None:
            parts.append(f"runs as uid {self.uid}")
        elif self.user_namespace:
            parts.append("in a user namespace, as curate's own user")
        else:
            parts.append("as curate's own user")
        if self.python:
            parts.append(f"python {self.python}")
        text = ", ".join(parts)
        return f"{text} ({self.reason})" if self.reason else text


NO_PROTECTION = Protection(network=False, pid=False, uid=None, user_namespace=False)


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one run ended. `completed`: the program returned normally (its token seen)."""

    status: Status
    stdout: str
    stderr: str
    exit_code: int | None
    seconds: float
    completed: bool
    detail: str = ""  # one line for the verdict (the last line of a traceback, a signal)


def python_executable() -> str:
    return sys.executable or shutil.which("python3") or "python3"


def minimal_env(workdir: str) -> dict[str, str]:
    """The program's whole environment: never a key, never anything of the parent's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
    }


def run_program(
    source: str,
    *,
    stdin: str = "",
    limits: Limits = Limits(),
    mode: Literal["script", "stdio"] = "script",
    protection: Protection | None = None,
) -> RunResult:
    """Run `source` as ``__main__`` in the sandbox; never raises for what the program
    does (a harness failure is status ``harness``).

    `mode` ``script``: the program is code plus its tests, and an early ``sys.exit(0)``
    counts as not finishing. ``stdio``: a solution reading stdin, for which exiting with
    0 is a normal end.
    """
    fence = protection if protection is not None else protection_available()
    box = tempfile.mkdtemp(prefix="curate-code-")
    started = time.monotonic()
    try:
        return _run_in(box, source, stdin, limits, mode, fence, started)
    except OSError as exc:
        return RunResult(
            "harness", "", "", None, time.monotonic() - started, False, f"sandbox: {exc}"
        )
    finally:
        shutil.rmtree(box, ignore_errors=True)


def _run_in(
    box: str,
    source: str,
    stdin: str,
    limits: Limits,
    mode: str,
    fence: Protection,
    started: float,
) -> RunResult:
    workdir = os.path.join(box, "work")
    os.mkdir(workdir, 0o700)
    if fence.uid is not None:
        os.chown(workdir, fence.uid, fence.uid)
    program = os.path.join(box, "main.py")
    Path(program).write_text(source, encoding="utf-8")
    token = secrets.token_hex(16).encode()
    token_file = os.path.join(box, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as token_out:
        token_out.write(token)
    Path(box, "stdin").write_text(stdin, encoding="utf-8")
    files = {
        name: open(os.path.join(box, name), "w+b" if name != "stdin" else "rb")  # noqa: SIM115
        for name in ("stdin", "stdout", "stderr", "token_out", "status")
    }
    config = {
        "program": program,
        "token_file": token_file,
        "workdir": workdir,
        "unshare": fence.unshare_flags,
        "pidns": fence.pid,
        "uid": fence.uid,
        "cpu_s": limits.cpu_seconds(),
        "memory_mb": limits.memory_mb,
        "fsize_mb": limits.fsize_mb,
        "nproc": limits.nproc,
        "mode": mode,
        "token_fd": files["token_out"].fileno(),
        "status_fd": files["status"].fileno(),
    }
    killed = False
    try:
        process = subprocess.Popen(
            [fence.python or python_executable(), "-I", "-c", _BOOTSTRAP, json.dumps(config)],
            stdin=files["stdin"],
            stdout=files["stdout"],
            stderr=files["stderr"],
            pass_fds=(files["token_out"].fileno(), files["status"].fileno()),
            cwd=workdir,
            env=minimal_env(workdir),
            start_new_session=True,
            close_fds=True,
        )
        try:
            killed = not _wait(process, limits.wall_s)
        finally:
            _kill_group(process.pid)
            process.wait()
        seconds = time.monotonic() - started
        outputs = {name: _read(files[name], limits.output_bytes) for name in files}
    finally:
        for handle in files.values():
            handle.close()
    return _classify(process.returncode, outputs, token, killed, seconds, fence, limits)


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait for `process` to end within `timeout_s`; False if it did not.

    A pidfd wakes up the moment the process ends; `Popen.wait(timeout)` polls with
    sleeps of up to 50 ms, a large share of a trivial program's time."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            pidfd = pidfd_open(process.pid)
        except OSError:
            pidfd = None
        if pidfd is not None:
            try:
                ready, _, _ = select.select([pidfd], [], [], timeout_s)
            finally:
                os.close(pidfd)
            return bool(ready)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read(handle: object, limit: int) -> bytes:
    handle.seek(0)  # type: ignore[attr-defined]
    return handle.read(limit)  # type: ignore[attr-defined,no-any-return]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _classify(
    returncode: int,
    outputs: dict[str, bytes],
    token: bytes,
    killed: bool,
    seconds: float,
    fence: Protection,
    limits: Limits,
) -> RunResult:
    stdout = outputs["stdout"].decode("utf-8", errors="replace")
    stderr = outputs["stderr"].decode("utf-8", errors="replace")
    completed = outputs["token_out"] == token
    status_line = outputs["status"].decode("ascii", errors="replace").strip()
    signal_number: int | None = None
    exit_code: int | None = returncode
    if fence.pid:
        # The reaper's report: the program's own end, not the bootstrap's.
        word, _, number = status_line.partition(" ")
        if word == "signal" and number.isdigit():
            signal_number, exit_code = int(number), None
        elif word == "exit" and number.isdigit():
            exit_code = int(number)
        elif returncode == _EXIT_HARNESS:
            exit_code = _EXIT_HARNESS
        elif not killed:
            signal_number, exit_code = (-returncode if returncode < 0 else None), None
    elif returncode < 0:
        signal_number, exit_code = -returncode, None

    def result(status: Status, detail: str) -> RunResult:
        return RunResult(status, stdout, stderr, exit_code, seconds, completed, detail)

    if killed:
        return result("timeout", f"wall-clock deadline {limits.wall_s:g}s")
    if exit_code == _EXIT_HARNESS:
        return result("harness", _last_line(stderr) or "the sandbox could not start")
    if signal_number is not None:
        name = _signal_name(signal_number)
        if signal_number == signal.SIGXCPU or (
            signal_number == signal.SIGKILL and seconds >= limits.cpu_seconds()
        ):
            return result("timeout", f"CPU limit {limits.cpu_seconds()}s ({name})")
        if signal_number == signal.SIGXFSZ:
            return result("limit", f"file size limit {limits.fsize_mb} MB ({name})")
        return result("crashed", f"killed by {name}")
    if exit_code == 0:
        return result("ok", "")
    if exit_code == _EXIT_EARLY:
        return result("ok", "sys.exit(0) before the end of the tests")
    if exit_code == _EXIT_ASSERTION:
        return result("assertion", _last_line(stderr) or "AssertionError")
    if exit_code == _EXIT_MEMORY:
        return result("limit", f"memory limit {limits.memory_mb} MB (MemoryError)")
    detail = _last_line(stderr) or f"exit code {exit_code}"
    if "File too large" in detail or "EFBIG" in detail:
        return result("limit", f"file size limit {limits.fsize_mb} MB")
    if "BlockingIOError" in detail or "Resource temporarily unavailable" in detail:
        return result("limit", f"process limit {limits.nproc}: {detail}")
    return result("error", detail)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# -- what this machine allows ------------------------------------------------------------


# Modules solutions commonly import: the interpreter must be readable by the program's
# user (a Python under /root is not, for `nobody`). Then the network must be cut.
_PROBE = (
    "import collections, fractions, functools, heapq, itertools, json, math, re, socket\n"
    "import typing\n"
    "s = socket.socket()\n"
    "s.settimeout(1)\n"
    "print(s.connect_ex(('127.0.0.1', 9)))\n"
)
SYSTEM_PYTHON = "/usr/bin/python3"


@functools.cache
def protection_available() -> Protection:
    """The strongest fence that works here, tried once per process: as root, network
    and PID namespaces and the uid `nobody` (with this interpreter, else the system's
    ``/usr/bin/python3`` when this one is not readable by `nobody`); otherwise the same
    namespaces inside a user namespace; else none (with the reasons)."""
    candidates: list[Protection] = []
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if is_root:
        pythons = [""]
        if os.path.exists(SYSTEM_PYTHON) and os.path.realpath(SYSTEM_PYTHON) != os.path.realpath(
            python_executable()
        ):
            pythons.append(SYSTEM_PYTHON)
        for python in pythons:
            candidates.append(Protection(True, True, NOBODY, False, python=python))
    candidates.append(Protection(True, True, None, True))
    reasons: list[str] = []
    limits = Limits(wall_s=20.0)
    for candidate in candidates:
        outcome = run_program(_PROBE, limits=limits, protection=candidate)
        who = f"uid {candidate.uid}" if candidate.uid is not None else "a user namespace"
        python = candidate.python or "curate's python"
        if outcome.status == "ok" and outcome.completed:
            if candidate.network and outcome.stdout.strip() == "0":
                reasons.append(f"{who}: a network namespace did not cut the network")
                continue
            return replace(candidate, reason="; ".join(reasons))
        reasons.append(f"{python} fails as {who}: {outcome.detail or outcome.status}")
    return replace(NO_PROTECTION, reason="; ".join(reasons) or "not available")
