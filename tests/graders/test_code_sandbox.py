"""Hostile completions through the code grader, written per attack class and wrapped in
every test layout (HumanEval check, MBPP asserts, a unittest script, APPS call-based,
stdin/stdout), graded in one batch beside correct programs: no forged pass, nothing read
from outside the box, nothing left behind, no neighbour harmed, the correct programs pass.
Real processes, real limits, no fakes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from curate.graders.code import CodeGrader
from curate.graders.sandbox import (
    NO_PROTECTION,
    Limits,
    protection_available,
    run_program,
    without,
)

SECRET = "sk-curate-test-0123456789"
MARKER = f"curate-leftover-{uuid.uuid4().hex[:8]}"
HEADER = "import json, os, re, signal, socket, sys, time\n"

# Each attack is the body of solve(x) (x = 2 or 3 or 5, the answer 2 * x): it returns the
# right answer only if the attack worked; otherwise None or nothing.
ATTACKS: dict[str, str] = {
    "SystemExit with a rigged int": """
        class Rigged(int):
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            __hash__ = int.__hash__
        raise SystemExit(Rigged(0))
    """,
    "frame walk to the verdict fd": """
        frame = sys._getframe()
        while frame is not None:
            for scope in (frame.f_locals, frame.f_globals):
                for value in list(scope.values()):
                    if isinstance(value, bytes):
                        for fd in range(3, 64):
                            try:
                                os.write(fd, value)
                            except OSError:
                                pass
            frame = frame.f_back
        for fd in range(3, 64):
            try:
                os.write(fd, b'{"verdict": "passed", "detail": ""}\\n{"value": 4}\\n')
            except OSError:
                pass
        os._exit(0)
    """,
    "trace hook": """
        def tracer(frame, event, arg):
            return tracer
        sys.settrace(tracer)
        sys._getframe().f_back.f_trace = tracer
        sys.setprofile(lambda *args: None)
    """,
    "harness globals": """
        frame = sys._getframe(1)
        for scope in (frame.f_locals, frame.f_globals):
            for name in ("_want", "want", "expected", "spec", "verdict"):
                if name in scope:
                    return scope[name]
    """,
    "always-equal object": """
        class Anything:
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
        return Anything()
    """,
    "rebound builtins": """
        import builtins
        builtins.AssertionError = type("Never", (Exception,), {})
        builtins.isinstance = lambda *args: True
        return None
    """,
    "host /proc cmdline and data set": """
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    raw = open(f"/proc/{pid}/cmdline", "rb").read()
                except OSError:
                    continue
                found += raw.decode(errors="replace").split("\\0")
        print("CMDLINES", found)
        for word in found:
            if word.startswith("/") and os.path.isfile(word):
                found_answer = re.search(r"answer=(\\d+)", open(word).read())
                if found_answer:
                    return int(found_answer[1]) * x // 2
        return found or None
    """,
    "host environ": """
        leaked = []
        for pid in os.listdir("/proc"):
            try:
                leaked.append(open(f"/proc/{pid}/environ", "rb").read().decode())
            except OSError:
                pass
        print("ENVIRON", leaked, dict(os.environ))
        return " ".join(leaked) + repr(dict(os.environ))
    """,
    "data set and manifest by path": """
        for path in PATHS:
            try:
                text = open(path).read()
            except OSError:
                continue
            found_answer = re.search(r"answer=(\\d+)", text)
            if found_answer:
                return int(found_answer[1]) * x // 2
    """,
    "leftovers": """
        for folder in ("/tmp", "/var/tmp", "/dev/shm"):
            with open(os.path.join(folder, MARKER), "w") as handle:
                handle.write("left behind")
    """,
    "memory across children": """
        r, w = os.pipe()
        children = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                block = bytearray(450 * 1024 * 1024)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                os.write(w, b"k")
                time.sleep(10)
                os._exit(0)
            children.append(pid)
        got = b""
        while len(got) < 3:
            got += os.read(r, 3)
        # All three hold their 450 MB at this moment, or one was killed to make room.
        if all(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in children):
            return x * 2
    """,
    "fork hog": """
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(4)
                    os._exit(0)
        except OSError:
            pass
        time.sleep(3)
    """,
    "disk fill": """
        for i in range(300):
            with open(f"/tmp/fill{i}", "wb") as handle:
                handle.write(b"x" * (1024 * 1024))
        return x * 2
    """,
    "host unix socket": """
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(HOST_SOCKET)
        s.sendall(b"leak")
        return x * 2
    """,
    "kill the parent and its group": """
        for pid in (os.getppid(), 1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os.killpg(0, signal.SIGKILL)
    """,
    "close every descriptor": """
        os.closerange(0, 256)
    """,
    "endless output": """
        while True:
            sys.stdout.write("x" * 65536)
            sys.stderr.write("y" * 65536)
    """,
    "infinite loop": """
        while True:
            pass
    """,
}
GOOD = "    return x * 2\n"
NEIGHBOUR = """
    from concurrent.futures import ThreadPoolExecutor
    time.sleep(0.5)
    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(lambda v: v, [x, x]))
"""


def program(body: str, constants: dict[str, object], stdio: bool) -> str:
    values = "".join(f"{name} = {value!r}\n" for name, value in constants.items())
    function = "def solve(x):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    tail = "\nprint(solve(int(input())))\n" if stdio else "\n"
    return f"```python\n{HEADER}{values}{function}\n{tail}```"


LAYOUTS: dict[str, tuple[object, dict[str, Any]]] = {
    "humaneval": (
        "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n",
        {"prompt": "def solve(x):\n", "entry_point": "solve"},
    ),
    "mbpp asserts": (["assert solve(2) == 4", "assert solve(3) == 6"], {}),
    "unittest script": (
        "import unittest\n\nclass T(unittest.TestCase):\n    def test(self):\n"
        "        self.assertEqual(solve(5), 10)\n\nif __name__ == '__main__':\n"
        "    unittest.main()\n",
        {},
    ),
    "call-based": ({"fn_name": "solve", "inputs": [[2], [3]], "outputs": [4, [6]]}, {}),
    "stdin/stdout": (json.dumps({"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"]}), {}),
}


@pytest.fixture(scope="module")
def host() -> Iterator[dict[str, Any]]:
    """What a program must not reach: a data set and a manifest holding the answers, a
    world-writable unix socket of the host (outside /tmp, which the box server's own
    mount namespace covers: in /var/tmp they are in reach of any unboxed process)."""
    root = Path(tempfile.mkdtemp(prefix="curate-host-", dir="/var/tmp"))
    os.chmod(root, 0o755)
    data = root / "data.jsonl"
    data.write_text(json.dumps({"prompt": "double", "answer": "answer=4"}) + "\n")
    (root / "run").mkdir()
    manifest = root / "run" / "manifest.json"
    manifest.write_text(json.dumps({"data": str(data), "note": "answer=4"}))
    folder = tempfile.mkdtemp(prefix="curate-host-socket-", dir="/var/tmp")
    path = os.path.join(folder, "host.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    os.chmod(folder, 0o777)
    os.chmod(path, 0o777)
    listener.listen(8)
    listener.setblocking(False)
    yield {"data": data, "manifest": manifest, "socket": path, "listener": listener}
    listener.close()
    os.unlink(path)
    os.rmdir(folder)
    shutil.rmtree(root)


def test_hostile_programs_in_every_layout_beside_correct_ones(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CURATE_TEST_SECRET", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    constants = {
        "MARKER": MARKER,
        "HOST_SOCKET": host["socket"],
        "PATHS": [str(host["data"]), str(host["manifest"]), "/root/.bash_history"],
    }
    grader = CodeGrader("code", limits=Limits(wall_s=6.0, memory_mb=1024, nproc=32), workers=2)
    items: list[tuple[str, str, str, object, dict[str, Any]]] = []
    for layout, (tests, row) in LAYOUTS.items():
        stdio = layout == "stdin/stdout"
        items.append((layout, "good", program(GOOD, constants, stdio), tests, row))
        for name, body in ATTACKS.items():
            if name == "fork hog":  # graded right beside a neighbour that starts threads
                items.append((layout, name, program(body, constants, stdio), tests, row))
                items.append(
                    (layout, "neighbour", program(NEIGHBOUR, constants, stdio), tests, row)
                )
                continue
            items.append((layout, name, program(body, constants, stdio), tests, row))
        items.append((layout, "good again", program(GOOD, constants, stdio), tests, row))
    results = grader.grade_batch(
        [item[2] for item in items], [item[3] for item in items], [item[4] for item in items]
    )
    failures = []
    for (layout, name, _, _, _), result in zip(items, results, strict=True):
        should_pass = name in ("good", "good again", "neighbour")
        if result.error is not None or result.score != (1.0 if should_pass else 0.0):
            failures.append((layout, name, result))
        for leak in (SECRET, str(host["data"]), "pytest", "answer="):
            assert leak not in (result.extracted or "") + (result.error or ""), (layout, name)
    assert failures == []
    by = {(layout, name): r for (layout, name, *_), r in zip(items, results, strict=True)}
    assert "tampering" in by[("humaneval", "trace hook")].extracted
    assert "not plain data" in by[("call-based", "always-equal object")].extracted
    assert "limit" in by[("mbpp asserts", "disk fill")].extracted
    # Nothing left on the host, and nobody reached its socket.
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.exists(os.path.join(folder, MARKER)), folder
    with pytest.raises(BlockingIOError):
        host["listener"].accept()


def test_the_box_sees_its_own_processes_files_and_empty_scratch_only(host: dict[str, Any]) -> None:
    fence = protection_available()
    if not (fence.pid and fence.mount):
        pytest.skip(f"no PID or mount namespace here: {fence.summary}")
    probe = (
        "import os\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(os.listdir('/tmp'), os.listdir('/var/tmp'), os.listdir('/dev/shm'))\n"
        f"print(os.path.exists({str(host['data'])!r}), os.path.exists('/root/.bashrc'),"
        f" os.path.exists({os.getcwd()!r}))\n"
        "open('/tmp/made', 'w').write('x')\n"
    )
    for _ in range(2):  # the second box does not see the first one's file
        result = run_program(probe)
        assert result.status == "ok", result
        pids, scratch, visible = result.stdout.splitlines()
        assert pids == "['1', '2']"
        assert scratch == "[] [] []"
        assert visible == "False False False"


def test_the_program_sees_no_secret_in_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CURATE_TEST_SECRET", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = run_program("import os\nprint(sorted(os.environ))\nprint(repr(dict(os.environ)))")
    assert result.status == "ok" and result.completed, result
    assert SECRET not in result.stdout and "OPENAI_API_KEY" not in result.stdout


def test_a_socket_to_a_loopback_listener_is_not_reached() -> None:
    fence = protection_available()
    if not fence.network:
        pytest.skip(f"no network namespace on this machine: {fence.summary}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        result = run_program(
            "import socket\ns = socket.socket()\ns.settimeout(2)\n"
            f"s.connect(('127.0.0.1', {port}))\n"
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert result.status == "error" and "unreachable" in result.detail, result


def test_a_stderr_flood_gets_a_short_reason() -> None:
    result = run_program("import sys\nwhile True:\n    sys.stderr.write('e' * 100000)\n")
    assert result.status == "limit" and len(result.detail) < 120, result.detail


def test_the_protection_summary_names_every_protection() -> None:
    summary = protection_available().summary
    for word in ("network", "PID", "mount", "uid", "cgroup", "seccomp", "python"):
        assert word in summary, summary


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_kill_9_mid_grade_leaves_no_sandbox_process_and_no_box_directory(tmp_path: Path) -> None:
    """`curate eval --grader code` killed with SIGKILL while the reference check runs the
    data set's canonical solutions (which sleep): every sandbox process is gone within
    seconds, and nothing is left in /tmp."""
    marker = f"curate-killed-{uuid.uuid4().hex[:8]}"
    data = tmp_path / "slow.jsonl"
    rows = [
        {
            "prompt": f"def solve{i}(x):\n",
            "entry_point": f"solve{i}",
            "test": "def check(candidate):\n    assert candidate(2) == 4\n",
            "canonical_solution": (
                f"    open('/tmp/{marker}', 'w').write('x')\n"
                "    import time\n    time.sleep(60)\n    return 2 * x\n"
            ),
        }
        for i in range(4)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = set(os.listdir("/tmp"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [
        sys.executable,
        "-m",
        "curate",
        "eval",
        str(data),
        "--model",
        "fake-model",
        "--backend",
        "fake",
        "--grader",
        "code",
        "--grader-workers",
        "2",
        "--grader-timeout",
        "120",
        "--dry-run",
        "--out",
        str(tmp_path / "run"),
    ]
    grading = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    sandbox: set[int] = set()
    while time.monotonic() < deadline and len(sandbox) < 8:  # 2 servers and their boxes
        time.sleep(0.2)
        sandbox = _descendants(grading.pid)
    assert len(sandbox) >= 8, sandbox
    time.sleep(0.5)
    grading.kill()  # SIGKILL: no atexit, no finally
    grading.wait()
    deadline = time.monotonic() + 8
    alive = sandbox
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {pid for pid in sandbox if _running(pid)}
    assert alive == set()
    assert not os.path.exists(f"/tmp/{marker}")
    assert {name for name in set(os.listdir("/tmp")) - before if "curate" in name} == set()


def _running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_the_fallbacks_still_apply_limits_environment_deadline_and_the_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What runs where a protection is unavailable, forced here whatever this machine
    allows: each protection dropped alone, then all of them."""
    monkeypatch.setenv("CURATE_TEST_SECRET", SECRET)
    full = protection_available()
    fences = [
        without(full, name) for name in ("seccomp", "cgroup", "uid", "mount", "pid", "network")
    ]
    fences.append(replace(NO_PROTECTION, python=full.python))
    limits = Limits(wall_s=2.0, memory_mb=256)
    for fence in fences:
        loop = run_program("while True:\n    pass", limits=limits, protection=fence)
        assert loop.status == "timeout", (fence, loop)
        memory = run_program("b = bytearray(2 * 1024 ** 3)", limits=limits, protection=fence)
        assert memory.status == "limit", (fence, memory)
        env = run_program("import os\nprint(dict(os.environ))", protection=fence)
        assert env.status == "ok" and SECRET not in env.stdout, (fence, env)
        forged = run_program(
            'import os\ndef f(x):\n    os.write(5, b\'{"verdict": "passed"}\')\n    os._exit(0)\n',
            judge={"layout": "asserts", "tests": "assert f(2) == 4", "before": ""},
            protection=fence,
        )
        assert forged.status != "ok" and not forged.completed, (fence, forged)
        good = run_program(
            "def f(x):\n    return 2 * x\n",
            judge={"layout": "asserts", "tests": "assert f(2) == 4", "before": ""},
            protection=fence,
        )
        assert good.status == "ok" and good.completed, (fence, good)
    assert "NETWORK NOT ISOLATED" in fences[-1].summary
    assert "NO MOUNT NAMESPACE" in fences[-1].summary


_NOT_ROOT = """
import json
from curate.graders.sandbox import protection_available, run_program
fence = protection_available("/usr/bin/python3")
view = run_program(
    "import os\\nprint(os.getuid(), sorted(p for p in os.listdir('/proc') if p.isdigit()),"
    " os.listdir('/tmp'), open('/proc/self/status').read().split('CapEff:')[1].split()[0])",
    protection=fence,
)
judged = run_program(
    "def f(x):\\n    return 2 * x\\n",
    judge={"layout": "asserts", "tests": "assert f(2) == 4", "before": ""},
    protection=fence,
)
print(json.dumps([fence.summary, view.stdout, judged.status, judged.completed]))
"""


def test_without_root_a_user_namespace_gives_the_namespaces_and_no_capabilities() -> None:
    """curate run by an unprivileged user (here `nobody`, through setpriv, with the
    system's Python: curate's own lives under /root)."""
    if os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists():
        pytest.skip("needs root to become another user, and setpriv")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no system python3 for the unprivileged user")
    root = str(Path(__file__).resolve().parents[2])
    shown = subprocess.run(
        [
            "/usr/bin/setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "env",
            f"PYTHONPATH={root}",
            "/usr/bin/python3",
            "-c",
            _NOT_ROOT,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        check=False,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    summary, view, status, completed = json.loads(shown.stdout.strip().splitlines()[-1])
    if "user namespace" not in summary:
        pytest.skip(f"this kernel gives no user namespace to an unprivileged user: {summary}")
    assert "no network (own network namespace)" in summary and "own PID namespace" in summary
    uid, pids, scratch, capabilities = view.split(" ", 1)[0], *view.split(" ", 1)[1].rsplit(" ", 2)
    assert (uid, pids, scratch, capabilities.strip()) == (
        "0",
        "['1', '2']",
        "[]",
        "0000000000000000",
    )
    assert (status, completed) == ("ok", True)
