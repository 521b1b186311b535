"""The code grader's sandbox, inside: a warm box server, the boxes it forks, the program
runner and the judge. Standard library only, run by `curate.graders.sandbox` as
``python -I -S -c LOADER FD CODE_FD`` (its code read from a descriptor, so no path of the
checkout shows in a box), or as a script (``python -I -S boxserver.py FD``); it never
imports curate (curate's files are not visible inside a box).

Process tree for one test case (``split``: the tests run in a judge, the program in its
own box; ``stdio``: the program box alone, its stdout compared by curate)::

    curate --socketpair--> box server (root, or root of a user namespace; its own network
        |                  and mount namespaces and read-only roots, made once)
        |-- init: cloned into new PID, mount, IPC and UTS namespaces (pid 1 there); mounts
        |   |     the box's empty /tmp and its /proc, chroots, reaps, reports the end
        |   `-- program (pid 2): waits for its case, then takes its own uid, rlimits and
        |       seccomp filter and runs the program (not pid 1, which ignores signals whose
        |       action is the default: SIGXCPU or a SIGTERM would not stop it)
        `-- judge: forked; chroots, waits, takes its own uid, rlimits and seccomp filter,
            runs the tests (a proxy calls the program)

All of it is started ahead: while one case runs, the server starts the next case's boxes.

The program and the judge talk over one socketpair carrying JSON lines of plain data
(`encode` / `decode`): the judge asks the program to call a function with arguments and
gets back a value or an exception's name and message, never an object. The verdict is
written by the judge on a pipe the program never holds; the expected values never enter
the program's box (nor the server's memory: the tests reach the judge through a memfd the
server passes on unread).

Death: the server exits when curate's end of its socket closes (curate exited or was
killed); each init and judge dies with the server (PR_SET_PDEATHSIG), and when an init
(pid 1) dies the kernel kills every process of its PID namespace. The box's
files live in a tmpfs of its own mount namespace, which disappears with its last process:
nothing is written to the host's disk.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import ctypes
import dataclasses
import decimal
import errno
import fcntl
import fractions
import functools
import importlib.machinery
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
import types
from collections.abc import Callable, Sequence
from typing import Any

# -- plain data -----------------------------------------------------------------------------
# One JSON value per Python value: null, true/false, numbers and strings as themselves, a
# list as an array; everything else as an object with one key naming its type.

MAX_ITEMS = 1_000_000  # items an iterator returned by the program is drawn to, at most
MAX_DEPTH = 200


class NotPlain(TypeError):
    """A value that cannot cross the channel (an object, a function, a cycle...)."""


def encode(value: object, depth: int = 0) -> object:
    """`value` as JSON-able plain data, or `NotPlain` naming what could not cross."""
    if depth > MAX_DEPTH:
        raise NotPlain("a structure nested too deep")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if isinstance(value, int):
        return int.__index__(value) if kind is int else {"i": int.__repr__(value)}
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    nested = depth + 1
    if isinstance(value, list):
        return [encode(v, nested) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"t": [encode(v, nested) for v in tuple.__iter__(value)]}
    if isinstance(value, dict):
        return {"d": [[encode(k, nested), encode(v, nested)] for k, v in dict.items(value)]}
    if isinstance(value, frozenset):
        return {"f": [encode(v, nested) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"s": [encode(v, nested) for v in set.__iter__(value)]}
    if isinstance(value, bytes | bytearray):
        return {"b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, complex):
        return {"c": [value.real, value.imag]}
    if isinstance(value, fractions.Fraction):
        return {"q": [value.numerator, value.denominator]}
    if isinstance(value, decimal.Decimal):
        return {"D": str(value)}
    if isinstance(value, range):
        return {"r": [value.start, value.stop, value.step]}
    module = getattr(kind, "__module__", "")
    if module == "numpy" and hasattr(value, "tolist"):
        return encode(value.tolist(), nested)  # numpy scalars and arrays as their values
    if hasattr(value, "__next__") and hasattr(value, "__iter__"):
        drawn = []
        for item in value:  # a generator, map, filter, zip...: its items, in order
            drawn.append(encode(item, nested))
            if len(drawn) > MAX_ITEMS:
                raise NotPlain(f"an iterator of more than {MAX_ITEMS} items")
        return {"it": drawn}
    raise NotPlain(f"a {kind.__name__}")


def decode(data: object) -> object:
    """The Python value `data` (from `encode`) stands for; `ValueError` on anything else."""
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        ((tag, body),) = data.items()
        if tag == "i" and isinstance(body, str):
            return int(body)
        if tag == "t" and isinstance(body, list):
            return tuple(decode(v) for v in body)
        if tag == "d" and isinstance(body, list):
            return {decode(k): decode(v) for k, v in body}
        if tag == "s" and isinstance(body, list):
            return {decode(v) for v in body}
        if tag == "f" and isinstance(body, list):
            return frozenset(decode(v) for v in body)
        if tag == "b" and isinstance(body, str):
            return base64.b64decode(body)
        if tag == "c" and isinstance(body, list):
            return complex(float(body[0]), float(body[1]))
        if tag == "q" and isinstance(body, list):
            return fractions.Fraction(int(body[0]), int(body[1]))
        if tag == "D" and isinstance(body, str):
            return decimal.Decimal(body)
        if tag == "r" and isinstance(body, list):
            return range(int(body[0]), int(body[1]), int(body[2]))
        if tag == "it" and isinstance(body, list):
            return iter([decode(v) for v in body])
    raise ValueError(f"not plain data: {str(data)[:60]}")


# -- the channel ----------------------------------------------------------------------------

MAX_MESSAGE = 256 * 1024 * 1024


class Channel:
    """JSON lines over a stream socket."""

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.buffer = b""

    def send(self, message: dict[str, object]) -> None:
        self.sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def receive(self) -> dict[str, Any] | None:
        """The next message; None at the end of the stream."""
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
            if len(self.buffer) > MAX_MESSAGE:
                raise ValueError("a message over 256 MB")
        line, _, self.buffer = self.buffer.partition(b"\n")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("a message that is not an object")
        return message


# -- the program's side ---------------------------------------------------------------------


def main_namespace(name: str) -> dict[str, Any]:
    """A fresh ``__main__`` module (registered, so unittest, pickle and dataclasses find
    it) and ``sys.argv`` naming only the file."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    module.__dict__["__file__"] = name
    sys.modules["__main__"] = module
    sys.argv = [name]
    return module.__dict__


def _exception_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:300]


def _hooks() -> str:
    """Tampering the runner can see in its own interpreter."""
    found = []
    if sys.gettrace() is not None:
        found.append("a trace hook (sys.settrace)")
    if sys.getprofile() is not None:
        found.append("a profile hook (sys.setprofile)")
    return ", ".join(found)


def serve_program(source: str, channel_fd: int) -> None:
    """Load the program, then call its functions for the judge until the channel ends."""
    channel = Channel(channel_fd)
    namespace = main_namespace("main.py")
    try:
        exec(compile(source, "main.py", "exec"), namespace)
    except BaseException as exc:  # the program's own failure is the judge's to report
        channel.send({"loaded": False, "error": _exception_text(exc)})
        return
    channel.send({"loaded": True, "tamper": _hooks()})
    while True:
        request = channel.receive()
        if request is None:
            return
        channel.send(_answer(namespace, request))


def _answer(namespace: dict[str, Any], request: dict[str, Any]) -> dict[str, object]:
    if "describe" in request:
        return {"names": {name: _describe(namespace, name) for name in request["describe"]}}
    name = str(request.get("call"))
    try:
        solution = namespace.get("Solution") if request.get("solution") else None
        if isinstance(solution, type) and hasattr(solution, name):
            function = getattr(solution(), name)  # LeetCode style: a fresh Solution()
        else:
            function = namespace[name]
        args: Any = decode(request.get("args", []))
        kwargs: Any = decode(request.get("kwargs", {"d": []}))
        value = function(*args, **kwargs)
    except BaseException as exc:
        return {"raised": [type(exc).__name__, _exception_text(exc)], "tamper": _hooks()}
    try:
        return {"value": encode(value), "tamper": _hooks()}
    except NotPlain as exc:
        return {"unplain": str(exc), "tamper": _hooks()}
    except BaseException as exc:
        return {"raised": [type(exc).__name__, _exception_text(exc)], "tamper": _hooks()}


def _describe(namespace: dict[str, Any], name: str) -> dict[str, object]:
    if name not in namespace:
        return {"kind": "missing"}
    value = namespace[name]
    if type(value).__name__ == "module":
        return {"kind": "module", "module": str(getattr(value, "__name__", ""))}
    if callable(value):
        return {"kind": "callable"}
    try:
        return {"kind": "value", "value": encode(value)}
    except BaseException:
        return {"kind": "callable"}  # an object: reached only through calls, which fail


def run_stdio(source: str) -> int:
    """Run a program that reads stdin and writes stdout; its exit code."""
    namespace = main_namespace("main.py")
    code = 0
    try:
        exec(compile(source, "main.py", "exec"), namespace)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif type(exc.code) is int:
            code = exc.code
        else:
            print(f"SystemExit: {str(exc.code)[:200]}", file=sys.stderr)
            code = 1
    except AssertionError:
        traceback.print_exc()
        code = EXIT_ASSERTION
    except MemoryError:
        traceback.print_exc(limit=3)
        code = EXIT_MEMORY
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 1
    return code


EXIT_ASSERTION = 3
EXIT_MEMORY = 4
EXIT_HARNESS = 97


# -- the judge's side -----------------------------------------------------------------------


class ProgramGone(Exception):
    """The program's process ended (or broke the channel) while the judge needed it."""


class ProgramRaised(Exception):
    """The program raised during a call; `text` is its type and message."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class ProgramValue(Exception):
    """The program answered with something that is not plain data."""


class Tampered(Exception):
    """The program set a hook in its interpreter that it has no business setting."""


class TestsBroken(Exception):
    """The tests themselves cannot run (not the program's fault): an error row."""


# Exceptions a program's call may raise in the judge by name. Not StopIteration: raised
# inside `map(candidate, xs)` it would end the iteration early and skip the tests.
_SAFE_EXCEPTIONS = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type)
    and issubclass(value, Exception)
    and not issubclass(value, AssertionError | StopIteration | StopAsyncIteration)
}
# Module aliases a test may read from the program without importing them itself.
_MODULE_ALIASES = {"np": "numpy", "pd": "pandas"}


class Remote:
    """The judge's end of the channel: calls into the program's box."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.greeted = False

    def greet(self) -> None:
        """Read the program's first message (loaded or not), once: the judge loads its
        tests meanwhile, and reads it before its first call or its verdict."""
        if self.greeted:
            return
        self.greeted = True
        try:
            hello = self.channel.receive()
        except (OSError, ValueError) as exc:
            raise ProgramGone(f"the program broke the channel: {exc}") from None
        if hello is None:
            raise ProgramGone("the program ended before its tests ran")
        if not hello.get("loaded"):
            raise ProgramRaised(str(hello.get("error", ""))[:300])
        if hello.get("tamper"):
            raise Tampered(str(hello["tamper"]))

    def ask(self, request: dict[str, object]) -> dict[str, Any]:
        self.greet()
        try:
            self.channel.send(request)
            reply = self.channel.receive()
        except (OSError, ValueError) as exc:
            raise ProgramGone(f"the channel broke: {exc}") from None
        if reply is None:
            raise ProgramGone("the program ended during a call")
        if reply.get("tamper"):
            raise Tampered(str(reply["tamper"]))
        return reply

    def call(
        self, name: str, args: tuple[object, ...], kwargs: dict[str, object], solution: bool
    ) -> object:
        try:
            payload = {"args": encode(list(args)), "kwargs": encode(kwargs)}
        except NotPlain as exc:
            raise TestsBroken(
                f"the tests pass {exc} to {name}(), which only plain data can reach"
            ) from None
        reply = self.ask({"call": name, "solution": solution, **payload})
        if "value" in reply:
            try:
                return decode(reply["value"])
            except (ValueError, TypeError, IndexError) as exc:
                raise ProgramGone(f"the program sent {exc}") from None
        if "unplain" in reply:
            raise ProgramValue(f"{name}() returned {reply['unplain']}, not plain data")
        if "raised" in reply:
            kind, text = ([*list(reply["raised"]), "", ""])[:2]
            error = _SAFE_EXCEPTIONS.get(str(kind))
            try:
                raised = error(str(text)) if error is not None else None
            except Exception:  # a builtin exception wanting other arguments
                raised = None
            if raised is None:
                raise ProgramRaised(str(text))
            raised.__dict__["_from_program"] = str(text)
            raise raised
        raise ProgramGone("the program sent an answer the judge cannot read")

    def proxy(self, name: str, solution: bool = False) -> Callable[..., object]:
        def candidate(*args: object, **kwargs: object) -> object:
            return self.call(name, args, kwargs, solution)

        candidate.__name__ = name
        return candidate


def _free_names(code: str) -> list[str]:
    """Names the test code reads but never binds: the program's, presumably."""
    import ast

    tree = ast.parse(code)
    loaded: list[str] = []
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    seen: dict[str, None] = {}
    for name in loaded:
        if name not in bound and not hasattr(builtins, name):
            seen[name] = None
    return list(seen)


def _run_code(code: str, namespace: dict[str, Any], label: str) -> None:
    exec(compile(code, label, "exec"), namespace)


def judge(spec: dict[str, Any], remote: Remote) -> dict[str, str]:
    """Run the tests of one case against the program behind `remote`; the verdict."""
    exit_code: object = None
    try:
        try:
            _judge(spec, remote)
        except SystemExit as exc:  # the tests' own exit (unittest.main): 0 is a pass
            exit_code = exc.code
        remote.greet()  # a program that never loaded fails even tests that never call it
        if not (exit_code is None or exit_code == 0):
            return {"verdict": "failed", "detail": f"the tests exited with {str(exit_code)[:60]}"}
    except AssertionError as exc:
        text = _exception_text(exc)
        program = exc.__dict__.get("_from_program")
        return {"verdict": "failed", "detail": program or text}
    except ProgramGone as exc:
        return {"verdict": "gone", "detail": str(exc)}
    except ProgramValue as exc:
        return {"verdict": "failed", "detail": str(exc)}
    except ProgramRaised as exc:
        return {"verdict": "crashed", "detail": exc.text}
    except Tampered as exc:
        return {"verdict": "tampered", "detail": f"tampering: {exc}"}
    except TestsBroken as exc:
        return {"verdict": "harness", "detail": str(exc)}
    except BaseException as exc:
        program = exc.__dict__.get("_from_program") if hasattr(exc, "__dict__") else None
        return {"verdict": "crashed", "detail": program or _exception_text(exc)}
    return {"verdict": "passed", "detail": ""}


def _judge(spec: dict[str, Any], remote: Remote) -> None:
    layout = spec["layout"]
    namespace = main_namespace("tests.py")
    if layout == "call":
        name = spec["fn_name"]
        got = _plain_lists(remote.call(name, tuple(spec["args"]), {}, True))
        want = spec["expected"]  # JSON from the data set, compared as such
        if not (got == want or [got] == want):
            raise AssertionError(f"expected {_short(want)}, got {_short(got)}")
        return
    if spec.get("before"):
        try:
            _run_code(spec["before"], namespace, "setup")
        except Exception as exc:
            raise TestsBroken(f"the test set-up fails: {_exception_text(exc)}") from None
    if layout == "humaneval":
        entry = spec["entry_point"]
        prompt = spec.get("prompt") or ""
        # The prompt's helpers (HumanEval/32's poly, /38's encode_cyclic).
        with contextlib.suppress(Exception):
            _run_code(prompt, namespace, "prompt")
        candidate = remote.proxy(entry)
        namespace[entry] = candidate
        try:
            _run_code(spec["tests"], namespace, "tests")
        except Exception as exc:
            raise TestsBroken(f"the tests do not load: {_exception_text(exc)}") from None
        check = namespace.get("check")
        if not callable(check):
            raise TestsBroken("the tests define no check(candidate)")
        check(candidate)
        return
    names = _free_names(spec["tests"])
    missing = [name for name in names if name not in namespace]
    if missing:
        described = remote.ask({"describe": missing}).get("names", {})
        for name in missing:
            what = described.get(name) or {}
            kind = what.get("kind")
            if kind == "callable":
                namespace[name] = remote.proxy(name)
            elif kind == "value":
                namespace[name] = decode(what.get("value"))
            elif kind == "module" and what.get("module") in (name, _MODULE_ALIASES.get(name)):
                # The judge's own copy, and only of the module the name stands for: a
                # program does not choose what `math` means in the tests.
                import importlib

                with contextlib.suppress(ImportError):
                    namespace[name] = importlib.import_module(str(what["module"]))
    _run_code(spec["tests"], namespace, "tests")


def _plain_lists(value: object) -> object:
    if isinstance(value, list | tuple):
        return [_plain_lists(v) for v in value]
    return value


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- libc -----------------------------------------------------------------------------------

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

_libc: Any = None


def libc() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def unshare(flags: int) -> None:
    _check(libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        libc().mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def prctl(option: int, value: int, extra: int = 0) -> None:
    _check(
        libc().prctl(
            ctypes.c_int(option),
            ctypes.c_ulong(value),
            ctypes.c_ulong(extra),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ),
        f"prctl {option}",
    )


def enter_user_namespace() -> None:
    """Become root of a new user namespace, mapped to this process's own user."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, NO_CAP_AMBIENT_RAISE, each with its lock.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80


def drop_capabilities() -> None:
    """For a program that runs as uid 0 (of a user namespace, or of the host when no other
    uid is available): no capability now, none regained by exec, none in the bounding set."""
    prctl(PR_SET_SECUREBITS, _SECUREBITS)
    for capability in range(64):
        if libc().prctl(ctypes.c_int(PR_CAPBSET_DROP), ctypes.c_ulong(capability), 0, 0, 0):
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(libc().capset(header, data), "capset")


# -- seccomp --------------------------------------------------------------------------------
# A deny list (x86-64 only): calls a graded program has no use for and that widen what it
# can reach (namespaces, mounts, tracing, kernel keys, BPF...). They fail with EPERM.

AUDIT_ARCH_X86_64 = 0xC000003E
DENIED_SYSCALLS = {
    "ptrace": 101,
    "syslog": 103,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "init_module": 175,
    "delete_module": 176,
    "pivot_root": 155,
    "chroot": 161,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}
_CLONE = 56
_CLONE3 = 435
_NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWCGROUP
)


def seccomp_supported() -> bool:
    return os.uname().machine == "x86_64"


@functools.cache
def seccomp_filter() -> bytes:
    """The BPF program (built once, in the server, before any box is forked)."""
    ret_allow, ret_kill = 0x7FFF0000, 0x80000000
    ret_eperm, ret_enosys = 0x00050000 | 1, 0x00050000 | 38
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    program: list[tuple[int, int, int, int]] = [
        (ld_abs, 0, 0, 4),  # arch
        (jeq, 1, 0, AUDIT_ARCH_X86_64),
        (ret, 0, 0, ret_kill),
        (ld_abs, 0, 0, 0),  # syscall number
        (jge, 0, 1, 0x40000000),  # the x32 ABI
        (ret, 0, 0, ret_eperm),
        (jeq, 0, 1, _CLONE3),  # clone3's flags are out of reach: glibc falls back to clone
        (ret, 0, 0, ret_enosys),
        (jeq, 0, 3, _CLONE),
        (ld_abs, 0, 0, 16),  # clone's flags (low half)
        (jset, 0, 1, _NAMESPACE_FLAGS),
        (ret, 0, 0, ret_eperm),
        (ld_abs, 0, 0, 0),
    ]
    for number in sorted(DENIED_SYSCALLS.values()):
        program += [(jeq, 0, 1, number), (ret, 0, 0, ret_eperm)]
    program.append((ret, 0, 0, ret_allow))
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


def install_seccomp() -> None:
    """Load the deny-list filter into this process (and all it starts)."""
    raw = seccomp_filter()
    buffer = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(raw) // 8, ctypes.addressof(buffer))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _check(
        libc().prctl(
            ctypes.c_int(PR_SET_SECCOMP),
            ctypes.c_ulong(SECCOMP_MODE_FILTER),
            ctypes.byref(fprog),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        ),
        "seccomp",
    )


# -- cgroups --------------------------------------------------------------------------------


class Cgroup:
    """One box's group in cgroup v2 (memory + pids) or v1 (the memory and pids
    hierarchies), under this server's own group; `available` False when neither works."""

    def __init__(self, name: str) -> None:
        self.dirs: list[str] = []
        self.version = 0
        self.name = name
        self.limits = (0, 0)
        try:
            self._make()
        except OSError:
            self.remove()
            self.dirs, self.version = [], 0

    @staticmethod
    def own_paths() -> dict[str, str]:
        paths: dict[str, str] = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(",") if controllers else [""]:
                    paths[controller] = path
        return paths

    def _make(self) -> None:
        own = self.own_paths()
        unified = "/sys/fs/cgroup"
        if os.path.exists(f"{unified}/cgroup.controllers"):
            parent = unified + own.get("", "/")
            with open(f"{parent}/cgroup.subtree_control") as f:
                enabled = f.read().split()
            if "memory" in enabled and "pids" in enabled:
                path = f"{parent}/{self.name}"
                os.makedirs(path, exist_ok=True)
                self.dirs, self.version = [path], 2
                return
        for controller in ("memory", "pids"):
            root = f"/sys/fs/cgroup/{controller}"
            if controller not in own or not os.path.exists(f"{root}/cgroup.procs"):
                raise OSError(f"no cgroup v1 {controller} hierarchy")
            path = f"{root}{own[controller].rstrip('/')}/{self.name}"
            os.makedirs(path, exist_ok=True)
            self.dirs.append(path)
        self.version = 1

    @property
    def available(self) -> bool:
        return self.version > 0

    def _write(self, leaf: str, value: str) -> None:
        for path in self.dirs:
            if os.path.exists(f"{path}/{leaf}"):
                with open(f"{path}/{leaf}", "w") as f:
                    f.write(value)

    def limit(self, memory_bytes: int, pids: int) -> None:
        if self.limits == (memory_bytes, pids):
            return
        self.limits = (memory_bytes, pids)
        if self.version == 2:
            self._write("memory.max", str(memory_bytes))
            self._write("memory.swap.max", "0")
            self._write("pids.max", str(pids))
        elif self.version == 1:
            self._write("memory.limit_in_bytes", str(memory_bytes))
            self._write("pids.max", str(pids))

    def join(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.dirs:
            try:
                with open(f"{path}/cgroup.procs") as f:
                    found.update(int(line) for line in f if line.strip())
            except OSError:
                pass
        return sorted(found)

    def counter(self, leaf: str, key: str) -> int:
        for path in self.dirs:
            try:
                with open(f"{path}/{leaf}") as f:
                    for line in f:
                        word, _, number = line.partition(" ")
                        if word == key:
                            return int(number)
            except (OSError, ValueError):
                continue
        return 0

    def oom_kills(self) -> int:
        leaf = "memory.events" if self.version == 2 else "memory.oom_control"
        return self.counter(leaf, "oom_kill")

    def fork_failures(self) -> int:
        return self.counter("pids.events", "max")

    def kill_all(self, wait_s: float = 5.0) -> None:
        if self.version == 2 and self.dirs:
            with contextlib.suppress(OSError):
                self._write("cgroup.kill", "1")
        deadline = time.monotonic() + wait_s
        while self.pids() and time.monotonic() < deadline:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        for path in self.dirs:
            with contextlib.suppress(OSError):
                os.rmdir(path)


def remove_stale_cgroups() -> None:
    """Groups left by servers that were killed (their pid no longer runs)."""
    own = Cgroup.own_paths()
    parents = ["/sys/fs/cgroup" + own.get("", "/")]
    for controller in ("memory", "pids"):
        if controller in own:
            parents.append(f"/sys/fs/cgroup/{controller}{own[controller].rstrip('/')}")
    for parent in parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            stale = len(parts) == 3 and parts[0] == "curatebox" and parts[1].isdigit()
            if stale and not os.path.exists(f"/proc/{parts[1]}"):
                with contextlib.suppress(OSError):
                    os.rmdir(f"{parent}/{name}")


# -- the box --------------------------------------------------------------------------------

HOLDER = "/tmp"  # where, in the server's own mount namespace, the boxes' roots are built
JUDGE_ROOT = "/tmp/judge"  # the judge's: the system and the interpreter, packages included
PROGRAM_ROOT = "/tmp/program"  # the program's: the system and the standard library only
BOX_FDS = 6  # fds 0..5 are the box's; everything else is closed
# Where a Python installation keeps third-party packages (and, for /usr/lib/python3*,
# the system interpreter's standard library): hidden from the program unless it is the
# standard library of the interpreter that runs it.
PACKAGE_GLOBS = (
    "/usr/lib/python*",
    "/usr/local/lib/python*",
    "/usr/share/python*",
    "/usr/local/share/python*",
    "/usr/lib/pypy*",
    "/usr/local/lib/pypy*",
)
PACKAGE_DIR_NAMES = ("site-packages", "dist-packages")


@dataclasses.dataclass
class ProgramView:
    """What the program box holds beyond the system directories: the interpreter's
    standard library (`stdlib`, also its whole ``sys.path``), the interpreter's own
    files (`files`), and the packages opted in (`packages`: their top-level directories
    and files; `sitedirs`: the directories added to ``sys.path`` for them; `site`: run
    ``site.addsitedir`` on those, .pth files included, for ``packages=site``)."""

    stdlib: list[str]
    files: list[str]
    packages: list[str]
    sitedirs: list[str]
    site: bool


def stdlib_view(packages: list[str], sitedirs: list[str], site: bool) -> ProgramView:
    """The program's view for this interpreter (started with -S: its ``sys.path`` is the
    standard library, once the script's own directory is dropped)."""
    stdlib = [p for p in sys.path if p and os.path.exists(p)]
    executable = os.path.realpath(sys.executable) if sys.executable else ""
    files = [executable] if executable and os.path.isfile(executable) else []
    if files:  # a shared libpython, which the interpreter needs to start again
        libdir = os.path.join(os.path.dirname(os.path.dirname(executable)), "lib")
        with contextlib.suppress(OSError):
            files += [
                os.path.join(libdir, name)
                for name in sorted(os.listdir(libdir))
                if name.startswith("libpython") and ".so" in name
            ]
    return ProgramView(stdlib, files, packages, sitedirs, site)


def package_masks(view: ProgramView) -> list[str]:
    """Directories of the program's root to cover with an empty one: every Python
    installation's package directories under the system directories, and those inside
    the standard library (a base interpreter's own site-packages), but never a directory
    holding the standard library itself."""
    import glob

    kept = [*view.stdlib, *view.files]
    masks: list[str] = []
    for pattern in PACKAGE_GLOBS:
        for path in sorted(glob.glob(pattern)):
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            if any(k == path or k.startswith(path + "/") for k in kept):
                masks += [os.path.join(path, name) for name in PACKAGE_DIR_NAMES]
            else:
                masks.append(path)
    for path in view.stdlib:
        masks += [os.path.join(path, name) for name in PACKAGE_DIR_NAMES]
    found: list[str] = []
    for path in masks:
        if path not in found and os.path.isdir(path) and not os.path.islink(path):
            found.append(path)
    return found


def build_roots(judge: list[str], system: list[str], program: ProgramView) -> None:
    """The boxes' two root file systems, in the server's mount namespace: the judge's
    holds `judge` (the system and the interpreter's prefixes, packages included: it runs
    the data set's tests); the program's holds `system`, the standard library, the
    interpreter's own files and the packages opted in, with every other package
    directory under them covered by an empty one."""
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    mount("curate-roots", HOLDER, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
    build_root(JUDGE_ROOT, judge, [], [], [])
    build_root(
        PROGRAM_ROOT,
        [*system, *program.stdlib],
        program.files,
        package_masks(program),
        program.packages,
    )
    mount("none", HOLDER, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _bind(path: str, target: str) -> None:
    if os.path.isdir(path):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()
    mount(path, target, None, MS_BIND | MS_REC)
    mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def build_root(
    root: str, paths: list[str], files: list[str], masks: list[str], extra: list[str]
) -> None:
    """A tmpfs at `root` holding read-only bind mounts of `paths` (directories) and
    `files`, then an empty directory over each of `masks`, then the opted-in `extra`
    directories and files (which may lie inside a mask), and nothing else."""
    os.makedirs(root, mode=0o755, exist_ok=True)
    mount("curate-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for path in sorted(paths, key=len):  # a parent before what is nested in it
        target = root + path
        if os.path.islink(path):
            if not os.path.lexists(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(os.readlink(path), target)
            continue
        if not os.path.isdir(path) or (os.path.isdir(target) and os.listdir(target)):
            continue  # missing, or already inside a directory bound above
        _bind(path, target)
    for path in files:
        if not os.path.exists(root + path):
            _bind(path, root + path)
    covered = []
    for path in masks:
        if os.path.isdir(root + path):
            mount("curate-hidden", root + path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
            covered.append(root + path)
    for path in extra:
        if os.path.exists(path) and not os.path.islink(path):
            _bind(path, root + path)
    for target in covered:
        mount("none", target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for name in ("tmp", "proc", "dev", "var"):
        os.makedirs(f"{root}/{name}", mode=0o755, exist_ok=True)
    for device in ("null", "zero", "full", "random", "urandom"):
        target = f"{root}/dev/{device}"
        open(target, "w").close()
        mount(f"/dev/{device}", target, None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(f"{root}/dev/shm", exist_ok=True)
    os.makedirs(f"{root}/var/tmp", exist_ok=True)
    mount("none", root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _box_mounts(disk_mb: int) -> None:
    """In a box's own mount namespace: one size-limited tmpfs for /tmp, /var/tmp and
    /dev/shm (the disk quota), empty."""
    root = PROGRAM_ROOT
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    mount(
        "curate-tmp",
        f"{root}/tmp",
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"size={disk_mb}m,mode=0755,nr_inodes=10000",
    )
    for sub, target in (("var-tmp", "var/tmp"), ("shm", "dev/shm"), ("tmp", "tmp")):
        os.makedirs(f"{root}/tmp/.box/{sub}", 0o1777)
        os.chmod(f"{root}/tmp/.box/{sub}", 0o1777)
        # /tmp last: it covers the tmpfs's top, so only the three empty directories show.
        mount(f"{root}/tmp/.box/{sub}", f"{root}/{target}", None, MS_BIND)


def _limits(cfg: dict[str, Any]) -> None:
    mb = 1024 * 1024
    for name, soft, hard in (
        ("RLIMIT_CPU", cfg["cpu_s"], cfg["cpu_s"] + 1),
        ("RLIMIT_AS", cfg["memory_mb"] * mb, cfg["memory_mb"] * mb),
        ("RLIMIT_FSIZE", cfg["fsize_mb"] * mb, cfg["fsize_mb"] * mb),
        ("RLIMIT_NPROC", cfg["nproc"], cfg["nproc"]),
        ("RLIMIT_CORE", 0, 0),
    ):
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _keep_fds(fds: dict[int, int]) -> None:
    """Make `fds` (target -> source) the process's fds 0..n; close every other one."""
    moved = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 64) for target, source in fds.items()}
    for target, source in moved.items():
        os.dup2(source, target, inheritable=True)
    os.closerange(max(fds) + 1 if fds else 0, os.sysconf("SC_OPEN_MAX"))


def _clone(flags: int) -> int:
    """fork() into new namespaces (with CLONE_NEWPID the child is pid 1 of its own)."""
    if not flags:
        return os.fork()
    number = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"clone into namespaces on {os.uname().machine}")
    call = libc().syscall
    call.restype = ctypes.c_long
    zero = ctypes.c_ulong(0)
    pid = int(
        call(ctypes.c_long(number), ctypes.c_ulong(flags | signal.SIGCHLD), zero, zero, zero, zero)
    )
    if pid < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"clone: {os.strerror(number)}")
    return pid


def _harness_line() -> bytes:
    text = traceback.format_exc(limit=2)[-300:].encode(errors="replace")
    return b"harness " + text.replace(b"\n", b" | ") + b"\n"


def program_box(
    prep: dict[str, Any],
    uid: int | None,
    status_fd: int,
    ctl: int,
    group: Cgroup | None,
    view: ProgramView,
) -> None:
    """A program box's pid 1 (just cloned by the server); never returns. Sets up the
    box, starts the worker, which waits for its case, then reaps until the worker ends
    and reports how it ended on `status_fd`."""
    code = EXIT_HARNESS
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _close_all_but({status_fd, ctl})
        if group is not None:
            group.join(0)  # itself (a migration is slow: not on the server's time)
        fence = prep["fence"]
        if fence["mount"]:
            _box_mounts(prep["disk_mb"])
            if fence["pid"]:
                mount("proc", f"{PROGRAM_ROOT}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            os.chroot(PROGRAM_ROOT)
            os.chdir("/tmp")
        worker = os.fork()
        if worker == 0:
            _worker("program", ctl, uid, view)
        os.close(ctl)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:  # reap orphans too, until the worker ends
            done, status = os.waitpid(-1, 0)
            if done == worker:
                break
        if os.WIFSIGNALED(status):
            os.write(status_fd, b"signal %d\n" % os.WTERMSIG(status))
        else:
            os.write(status_fd, b"exit %d\n" % os.WEXITSTATUS(status))
        code = 0
    except BaseException:
        with contextlib.suppress(OSError):
            os.write(status_fd, _harness_line())
    os._exit(code)


def judge_box(
    prep: dict[str, Any], uid: int | None, ctl: int, server: int, group: Cgroup | None
) -> None:
    """A judge (just forked by the server): the read-only root, its own uid, no
    namespaces of its own (it runs the data set's tests, not the program); never
    returns."""
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:
            os._exit(EXIT_HARNESS)
        _close_all_but({ctl})
        if group is not None:
            group.join(0)
        if prep["fence"]["mount"]:
            os.chroot(JUDGE_ROOT)
            os.chdir("/tmp")
        _worker("judge", ctl, uid, None)
    except BaseException:
        os._exit(EXIT_HARNESS)


def _close_all_but(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _import_path(view: ProgramView | None) -> None:
    """The import system of a program (`view`) or of a judge (None), set before the case
    arrives. The server runs with -S (no site-packages, no .pth file run): a program
    imports from the standard library and the packages opted in only; a judge gets the
    interpreter's site-packages on its first import the standard library cannot serve."""
    if view is None:
        if sys.flags.no_site:
            sys.meta_path.append(SiteOnDemand())
        return
    sys.path[:] = view.stdlib if view.site else [*view.stdlib, *view.sitedirs]
    if view.files:  # the interpreter, as the box holds it (a venv's link is not there)
        sys.executable = sys._base_executable = view.files[0]  # type: ignore[attr-defined]
    if view.site:
        import site

        for path in view.sitedirs:
            site.addsitedir(path)  # .pth files included: every package is opted in


class SiteOnDemand:
    """The judge's last import finder: on the first module nothing else finds, it adds
    the interpreter's site-packages (``site.main``, run once), then looks again."""

    done = False

    def find_spec(
        self,
        name: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if self.done or path is not None:
            return None
        self.done = True
        import site

        site.main()
        return importlib.machinery.PathFinder.find_spec(name)


def _worker(role: str, ctl: int, uid: int | None, view: ProgramView | None) -> None:
    """The process that runs the program (or the judge): waits for its case (the
    settings and its descriptors, from the server), fences itself and runs it; never
    returns."""
    code = EXIT_HARNESS
    try:
        _import_path(view)
        control = socket.socket(fileno=ctl)
        message, fds, _, _ = socket.recv_fds(control, 1 << 16, 8)
        if not message:
            os._exit(0)
        cfg = json.loads(message)
        control.close()
        _keep_fds(dict(enumerate(fds)))
        fence = cfg["fence"]
        _limits(cfg)
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        elif os.getuid() == 0:
            drop_capabilities()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by setuid; set again
        os.environ.clear()
        os.environ.update(cfg["env"])
        if fence["seccomp"]:
            install_seccomp()
        else:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        source = _read_all(3)
        os.close(3)
        if role == "judge":
            spec = json.loads(source)
            verdict = judge(spec, Remote(Channel(4)))
            os.write(5, json.dumps(verdict).encode()[:4000])
            code = 0
        elif cfg["kind"] == "stdio":
            code = run_stdio(source.decode("utf-8", "replace"))
        else:
            serve_program(source.decode("utf-8", "replace"), 4)
            code = 0
    except BaseException:
        with contextlib.suppress(OSError):
            os.write(2, traceback.format_exc(limit=3).encode(errors="replace")[-2000:])
    os._exit(code & 0xFF)


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# -- the server -----------------------------------------------------------------------------


class Box:
    """A box the server started: ready (waiting for a case), running, or dying."""

    def __init__(
        self,
        role: str,
        slot: int,
        key: str,
        pid: int,
        ctl: socket.socket,
        status_r: int,
        group: Cgroup | None,
    ) -> None:
        self.role, self.slot, self.key, self.pid = role, slot, key, pid
        self.ctl, self.status_r, self.group = ctl, status_r, group
        self.pidfd = os.pidfd_open(pid)
        self.done = False
        self.status = ""
        self.wait_status = 0

    def finish(self) -> None:
        """Reap it (it has ended, or been killed) and read how its program ended."""
        if self.done:
            return
        _, self.wait_status = os.waitpid(self.pid, 0)
        os.close(self.pidfd)
        self.ctl.close()
        self.done = True
        if self.status_r >= 0:
            text = _drain(self.status_r).decode("utf-8", "replace")
            os.close(self.status_r)
            lines = text.splitlines()
            self.status = lines[-1] if lines else "killed"
        elif os.WIFSIGNALED(self.wait_status):
            self.status = f"signal {os.WTERMSIG(self.wait_status)}"
        else:
            self.status = f"exit {os.WEXITSTATUS(self.wait_status)}"

    def reap_if_gone(self) -> bool:
        """Reap it if it has ended; whether it has."""
        if not self.done and select.select([self.pidfd], [], [], 0)[0]:
            self.finish()
        return self.done

    def kill(self) -> None:
        """SIGKILL to its pid 1 (the whole PID namespace) or its process group."""
        if self.done:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)


SLOTS = 4  # boxes per role: running, ready, and dying ones, each with its cgroups and uid


class Server:
    """Serves runs over its control socket. While a case runs, the next case's boxes are
    started in another slot (forks and namespaces off the critical path); each slot has
    its own cgroups and uids, so a box being torn down never shares limits with the one
    in use, and a killed box is reaped when its slot is needed again."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.pid = os.getpid()
        self.features: dict[str, Any] = {}
        self.groups: dict[tuple[str, int], Cgroup] = {}
        self.ready: dict[str, Box] = {}
        self.dying: list[Box] = []
        self.running: list[Box] = []
        self.view = stdlib_view([], [], False)

    def uid(self, role: str, slot: int) -> int:
        """Unique to this server while it runs (pids are unique): a program's
        RLIMIT_NPROC is its own and no neighbour's."""
        return 1_000_000 + 2 * SLOTS * self.pid + 2 * slot + (role == "judge")

    def set_up(self, request: dict[str, Any]) -> dict[str, Any]:
        """The expensive part, once: namespaces, the root file systems, cgroups."""
        program = request.get("program") or {}
        self.view = stdlib_view(
            [str(p) for p in program.get("packages", [])],
            [str(p) for p in program.get("sitedirs", [])],
            bool(program.get("site")),
        )
        reasons: dict[str, str] = {}
        root = os.geteuid() == 0
        features: dict[str, Any] = {
            "root": root,
            "network": False,
            "mount": False,
            "pid": False,
            "cgroup": 0,
            "seccomp": False,
            "uid": root,
        }
        privileged = root
        if not root:
            # A user namespace, where the kernel allows one: this server is root inside
            # it (mapped to curate's own user), enough for the other namespaces and the
            # mounts; not for other uids or cgroups.
            reasons["uid"] = "curate is not root: programs run as its own user"
            reasons["cgroup"] = "curate is not root"
            try:
                enter_user_namespace()
                privileged = True
                features["user_namespace"] = True
            except OSError as exc:
                reasons["user namespace"] = str(exc)
        if privileged:
            try:
                unshare(CLONE_NEWNET)
                features["network"] = True
            except OSError as exc:
                reasons["network"] = str(exc)
            try:
                unshare(CLONE_NEWNS)
                build_roots(request["roots"], request["system"], self.view)
                features["mount"] = True
            except OSError as exc:
                reasons["mount"] = str(exc)
            features["pid"] = True  # tried per box; the probe run says whether it works
        if root:
            try:
                remove_stale_cgroups()
                for role in ("program", "judge"):
                    for slot in range(SLOTS):
                        group = Cgroup(f"curatebox-{self.pid}-{role}{slot}")
                        if group.available:
                            self.groups[role, slot] = group
                if len(self.groups) == 2 * SLOTS:
                    features["cgroup"] = self.groups["program", 0].version
                else:
                    reasons["cgroup"] = "no writable cgroup v2 or v1 memory+pids hierarchy"
            except OSError as exc:
                reasons["cgroup"] = str(exc)
        features["seccomp"] = seccomp_supported()
        if not features["seccomp"]:
            reasons["seccomp"] = f"no filter for {os.uname().machine}"
        features["reasons"] = reasons
        self.features = features
        return features

    def serve(self) -> None:
        try:
            self._serve()
        finally:
            for b in [*self.ready.values(), *self.dying, *self.running]:
                b.kill()
            for b in [*self.ready.values(), *self.dying, *self.running]:
                with contextlib.suppress(OSError):
                    b.finish()
            for group in self.groups.values():
                group.kill_all()
                group.remove()

    def _serve(self) -> None:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self.control, 1 << 16, 16)
            except OSError:
                return
            if not message:
                return
            try:
                request = json.loads(message)
                setup = request["op"] == "setup"
                reply = self.set_up(request) if setup else self.run(request, fds)
            except Exception as exc:  # the server keeps serving; curate sees the reason
                reply = {"error": _exception_text(exc)}
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if reply.get("hangup"):
                return
            try:
                self.control.sendall(json.dumps(reply).encode())
            except OSError:
                return

    # -- boxes

    def _free_slot(self, role: str) -> int:
        """A slot whose last box is gone (its processes reaped, its cgroup empty): one
        with nothing dying if any, else the oldest dying one, waited for."""
        busy = {b.slot for b in self.ready.values() if b.role == role}
        busy |= {b.slot for b in self.running if b.role == role}
        for b in [b for b in self.dying if b.role == role]:
            if b.reap_if_gone():
                self.dying.remove(b)
        dying = [b for b in self.dying if b.role == role]
        free = [s for s in range(SLOTS) if s not in busy and s not in {b.slot for b in dying}]
        if free:
            slot = free[0]
        else:
            oldest = next(b for b in dying if b.slot not in busy)
            oldest.finish()
            self.dying.remove(oldest)
            slot = oldest.slot
        group = self.groups.get((role, slot))
        if group is not None:
            group.kill_all()
        return slot

    def prepare(self, role: str, prep: dict[str, Any], key: str) -> Box:
        slot = self._free_slot(role)
        fence = prep["fence"]
        group = self.groups.get((role, slot)) if fence["cgroup"] else None
        if group is not None:
            group.limit(prep["memory_mb"] * 1024 * 1024, prep["nproc"])
        uid = self.uid(role, slot) if fence["uid"] else None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        status_r = -1
        if role == "program":
            status_r, status_w = os.pipe()
            flags = CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS if fence["pid"] else 0
            flags |= CLONE_NEWNS if fence["mount"] else 0
            try:
                pid = _clone(flags)
            except OSError:
                os.close(status_r)
                os.close(status_w)
                ours.close()
                theirs.close()
                raise
            if pid == 0:
                program_box(prep, uid, status_w, theirs.fileno(), group, self.view)
            os.close(status_w)
        else:
            pid = os.fork()
            if pid == 0:
                judge_box(prep, uid, theirs.fileno(), self.pid, group)
        theirs.close()
        return Box(role, slot, key, pid, ours, status_r, group)

    def _take(self, role: str, prep: dict[str, Any], key: str) -> Box:
        b = self.ready.pop(role, None)
        if b is not None and b.key == key:
            return b
        if b is not None:
            b.kill()
            self.dying.append(b)
        return self.prepare(role, prep, key)

    def run(self, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        cfg = request
        split = cfg["kind"] == "split"
        prep = {k: cfg[k] for k in ("fence", "disk_mb", "memory_mb", "nproc")}
        key = json.dumps(prep, sort_keys=True)
        roles = ("program", "judge") if split else ("program",)
        boxes = {role: self._take(role, prep, key) for role in roles}
        self.running = list(boxes.values())
        counters = {
            role: (b.group.oom_kills(), b.group.fork_failures()) if b.group else (0, 0)
            for role, b in boxes.items()
        }
        source, stdin, stdout, stderr = fds[:4]
        message = [json.dumps(cfg).encode()]
        verdict_r = -1
        if split:
            spec, judge_err = fds[4:6]
            ours, theirs = socket.socketpair()
            verdict_r, verdict_w = os.pipe()
            devnull = os.open(os.devnull, os.O_RDONLY)
            socket.send_fds(
                boxes["program"].ctl, message, [stdin, stdout, stderr, source, theirs.fileno()]
            )
            socket.send_fds(
                boxes["judge"].ctl,
                message,
                [devnull, judge_err, judge_err, spec, ours.fileno(), verdict_w],
            )
            for fd in (ours, theirs):
                fd.close()
            os.close(verdict_w)
            os.close(devnull)
        else:
            socket.send_fds(boxes["program"].ctl, message, [stdin, stdout, stderr, source])
        started = time.monotonic()
        for role in roles:  # the next case's boxes start while this one runs
            self.ready[role] = self.prepare(role, prep, key)
        prepared = time.monotonic() - started
        waiting = boxes["judge" if split else "program"]
        deadline = started + cfg["wall_s"]
        timed_out = hangup = False
        raw = b""
        judged = False  # the judge's verdict (or the end of its pipe) has arrived
        while not waiting.done and not judged:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            watch = [b.pidfd for b in boxes.values() if not b.done] + [self.control]
            if split:
                watch.append(verdict_r)
            ready, _, _ = select.select(watch, [], [], left)
            if self.control in ready and not self.control.recv(1, socket.MSG_PEEK):
                hangup = True
                break
            if split and verdict_r in ready:
                # One write of under PIPE_BUF bytes: all of it, or the judge is gone.
                raw = os.read(verdict_r, 65536)
                judged = True
            for b in boxes.values():
                if not b.done and b.pidfd in ready:
                    b.finish()
        seconds = time.monotonic() - started
        reply: dict[str, Any] = {
            "timed_out": timed_out,
            "seconds": seconds,
            "hangup": hangup,
            "prepare_s": prepared,
        }
        verdict = None
        if split:
            if not judged:
                raw = _drain(verdict_r)
            os.close(verdict_r)
            with contextlib.suppress(ValueError):
                verdict = json.loads(raw) if raw else None
            reply["verdict"] = verdict
            program = boxes["program"]
            gone = isinstance(verdict, dict) and verdict.get("verdict") == "gone"
            if gone and not program.done:
                # The program ended during a call: let its pid 1 report how.
                select.select([program.pidfd], [], [], 1.0)
                if select.select([program.pidfd], [], [], 0)[0]:
                    program.finish()
        for role, b in boxes.items():
            if not b.done:
                b.kill()
                self.dying.append(b)
            reply[role] = b.status or "killed"
        self.running = []
        for role, b in boxes.items():
            if b.group is not None:
                oom, forks = counters[role]
                reply[f"{role}_oom"] = b.group.oom_kills() > oom
                reply[f"{role}_fork_limit"] = b.group.fork_failures() > forks
        return reply


def _drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


# Modules that solutions commonly import (and the judge's ast), loaded once in the server
# so each box starts with them. Few: a fork's cost grows with the server's memory.
PRELOAD = (
    "ast",
    "bisect",
    "collections",
    "copy",
    "functools",
    "heapq",
    "itertools",
    "math",
    "operator",
    "re",
    "string",
    "typing",
)


NEUTRAL_ARGV = b"curate-box"


def hide_command_line() -> None:
    """Overwrite this process's command line (which every box's /proc/1/cmdline shows,
    being a fork of it) with a neutral one: it names this script's path, inside the
    checkout curate runs from. The interpreter's own copies go too."""
    sys.argv = [NEUTRAL_ARGV.decode()]
    if hasattr(sys, "orig_argv"):
        sys.orig_argv = [NEUTRAL_ARGV.decode()]
    script = str(globals().get("__file__", ""))
    here = os.path.dirname(os.path.abspath(script)) if script else ""
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
    except (OSError, IndexError, ValueError):
        return
    if end - start > len(NEUTRAL_ARGV):
        ctypes.memset(start, 0, end - start)
        ctypes.memmove(start, NEUTRAL_ARGV, len(NEUTRAL_ARGV))


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[1]))
    hide_command_line()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # curate decides; it closes the socket
    import importlib

    for module in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    libc()
    if seccomp_supported():
        seccomp_filter()
    Server(control).serve()


if __name__ == "__main__":
    main(sys.argv)
