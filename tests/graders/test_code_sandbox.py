"""Hostile completions through the code grader: none harms the host, the run, or the
other rollouts graded in the same batch (real processes, real limits, no fakes)."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from curate.graders.code import CodeGrader
from curate.graders.sandbox import (
    NO_PROTECTION,
    Limits,
    Protection,
    protection_available,
    run_program,
)

ENTRY = "solve"
PROMPT = "def solve(x):\n"
TEST = "def check(candidate):\n    assert candidate(2) == 4\n"
GOOD = "```python\ndef solve(x):\n    return x * 2\n```"
SECRET = "sk-curate-test-0123456789"


def _row() -> dict[str, object]:
    return {"prompt": PROMPT, "entry_point": ENTRY, "test": TEST}


def _hostile(body: str) -> str:
    """A completion whose program does `body` when the function is called."""
    indented = "\n".join("    " + line for line in body.splitlines())
    header = "import os, sys, signal, socket\ndef solve(x):"
    return f"```python\n{header}\n{indented}\n    return x * 2\n```"


@pytest.fixture(scope="module")
def grader() -> CodeGrader:
    return CodeGrader("code", limits=Limits(wall_s=6.0, memory_mb=512, nproc=32), workers=2)


def _grade(grader: CodeGrader, completions: list[str]) -> list[object]:
    rows = [_row() for _ in completions]
    return list(grader.grade_batch(completions, [TEST] * len(completions), rows))


def test_hostile_programs_fail_alone_and_good_ones_in_the_same_batch_pass(
    grader: CodeGrader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    key_file = tmp_path / "key.txt"
    key_file.write_text(SECRET)
    key_file.chmod(0o600)
    monkeypatch.setenv("CURATE_TEST_SECRET", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    hostile = {
        "fork bomb": "while True:\n    os.fork()",
        "infinite loop": "while True:\n    pass",
        "endless output": "while True:\n    sys.stdout.write('x' * 65536)",
        "50 GB": "block = bytearray(50 * 1024 ** 3)",
        "delete outside": f"os.remove({str(canary)!r})",
        "kill parent": "os.kill(os.getppid(), signal.SIGKILL)",
        "secret env": (
            f"assert {SECRET!r} not in repr(dict(os.environ))\n"
            "assert 'OPENAI_API_KEY' not in os.environ and 'CURATE_TEST_SECRET' not in os.environ\n"
            "raise SystemExit(0)"
        ),
        "key file": f"print(open({str(key_file)!r}).read())",
    }
    completions = [GOOD, *(_hostile(body) for body in hostile.values()), GOOD]
    started = time.monotonic()
    results = _grade(grader, completions)
    elapsed = time.monotonic() - started
    by_name = dict(zip(["good", *hostile, "good 2"], results, strict=True))
    # The good programs around the hostile ones pass: nothing leaked across rollouts.
    assert by_name["good"].score == 1.0 and by_name["good 2"].score == 1.0, by_name
    for name in hostile:
        result = by_name[name]
        assert result.error is None, (name, result)  # a verdict, not a harness failure
        assert result.score == 0.0, (name, result)
    assert "timeout" in by_name["infinite loop"].extracted
    assert "limit" in by_name["endless output"].extracted
    assert "limit" in by_name["50 GB"].extracted or "crashed" in by_name["50 GB"].extracted
    assert "limit" in by_name["fork bomb"].extracted or "timeout" in by_name["fork bomb"].extracted
    # The secret-env program exits before its tests: failed, never passed.
    assert "exited before its tests finished" in by_name["secret env"].extracted
    # Bounded by the deadlines (6 s a case, 2 at a time), not hung.
    assert elapsed < 60
    assert canary.read_text() == "still here"
    assert os.getpid() > 0  # this process survived the kill attempt


def test_the_program_sees_no_secret_in_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CURATE_TEST_SECRET", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = run_program("import os\nprint(sorted(os.environ))\nprint(repr(dict(os.environ)))")
    assert result.status == "ok" and result.completed, result
    assert SECRET not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout and "CURATE_TEST_SECRET" not in result.stdout


def test_the_key_file_and_the_canary_are_protected_when_running_as_another_user(
    tmp_path: Path,
) -> None:
    fence = protection_available()
    if fence.uid is None:
        pytest.skip(f"programs run as curate's own user here ({fence.summary})")
    key_file = tmp_path / "key.txt"
    key_file.write_text(SECRET)
    key_file.chmod(0o600)
    canary = tmp_path / "canary.txt"
    canary.write_text("still here")
    read = run_program(f"print(open({str(key_file)!r}).read())")
    assert read.status == "error" and "PermissionError" in read.detail
    assert SECRET not in read.stdout
    delete = run_program(f"import os\nos.remove({str(canary)!r})")
    assert delete.status == "error" and canary.read_text() == "still here"


def test_a_socket_to_a_loopback_listener_is_not_reached() -> None:
    fence = protection_available()
    if not fence.network:
        pytest.skip(f"no network namespace on this machine: {fence.summary}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                accepted.append(listener.accept())
                return
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        result = run_program(
            "import socket\n"
            "s = socket.socket()\n"
            "s.settimeout(2)\n"
            f"s.connect(('127.0.0.1', {port}))\n"
            "s.sendall(b'leak')\n"
        )
    finally:
        thread.join()
        listener.close()
    assert result.status == "error", result
    assert "OSError" in result.detail or "unreachable" in result.detail, result.detail
    assert accepted == []


def test_the_working_directory_is_empty_and_removed(tmp_path: Path) -> None:
    result = run_program(
        "import os\nprint(os.getcwd())\nprint(os.listdir('.'))\nopen('made.txt', 'w').write('x')"
    )
    assert result.status == "ok", result
    workdir, listing = result.stdout.splitlines()[:2]
    assert listing == "[]"
    assert not Path(workdir).exists()


def test_an_early_exit_is_not_a_pass_and_a_sys_exit_zero_in_a_script_is_not_either() -> None:
    early = run_program("import os\nos._exit(0)\nassert False")
    assert early.status == "ok" and not early.completed
    script = run_program("raise SystemExit(0)\nassert False", mode="script")
    assert script.status == "ok" and not script.completed
    stdio = run_program("print(3)\nraise SystemExit(0)", mode="stdio")
    assert stdio.status == "ok" and stdio.stdout.strip() == "3"


def test_the_protection_summary_is_explicit() -> None:
    summary = protection_available().summary
    assert "network" in summary.lower() and "PID" in summary


def test_the_fallbacks_still_apply_limits_environment_and_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What runs where namespaces are unavailable (no fence) or curate is not root (a user
    namespace), forced here whatever this machine allows."""
    monkeypatch.setenv("CURATE_TEST_SECRET", SECRET)
    python = protection_available().python
    fences = [
        replace(NO_PROTECTION, python=python),
        Protection(network=True, pid=True, uid=None, user_namespace=True, python=python),
    ]
    for fence in fences:
        probe = run_program("print(1)", protection=fence)
        if probe.status == "harness":
            continue  # this kernel refuses user namespaces: the probe would skip it too
        limits = Limits(wall_s=2.0, memory_mb=256)
        loop = run_program("while True:\n    pass", limits=limits, protection=fence)
        assert loop.status == "timeout", (fence, loop)
        memory = run_program("b = bytearray(2 * 1024 ** 3)", limits=limits, protection=fence)
        assert memory.status == "limit", (fence, memory)
        env = run_program("import os\nprint(dict(os.environ))", protection=fence)
        assert env.status == "ok" and SECRET not in env.stdout, (fence, env)
        if fence.network:
            net = run_program(
                "import socket\nprint(socket.socket().connect_ex(('127.0.0.1', 9)))",
                protection=fence,
            )
            assert net.stdout.strip() not in ("0", "111"), (fence, net)  # not even refused
