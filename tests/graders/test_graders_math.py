"""The `math` grader: real math_verify checks, and the process-pool failure paths.

The failure paths use an injected worker function defined at module level here: the
spawned pool workers import this module by name to find it (they inherit the parent's
sys.path), and `preload=()` keeps those pools from importing math_verify.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from curate.graders import GradeResult, get_grader
from curate.graders.mathverify import MathGrader

# --- injected workers (run inside the pool) --------------------------------------------


def echo_worker(completion: str, references: tuple[str, ...]) -> tuple[float, str | None]:
    """Correct when the completion equals a reference; misbehaves on request.

    "HANG:<file>" writes its pid to <file> and sleeps far past any timeout; "CRASH" kills
    its process; "RAISE" raises; "TIMEOUTERROR" raises TimeoutError itself; "BAD" returns
    an out-of-range score.
    """
    if completion.startswith("HANG:"):
        Path(completion.removeprefix("HANG:")).write_text(str(os.getpid()))
        time.sleep(120)
    if completion == "CRASH":
        os._exit(13)
    if completion == "RAISE":
        raise KeyError("no such thing")
    if completion == "TIMEOUTERROR":
        raise TimeoutError("raised by the worker, not a hang")
    if completion == "BAD":
        return 2.0, "bad"
    return (1.0 if completion in references else 0.0), completion


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def fake_grader() -> Iterator[MathGrader]:
    grader = MathGrader("math", timeout_s=1.0, workers=2, worker=echo_worker, preload=())
    try:
        yield grader
    finally:
        grader.close()


# --- timeouts and crashes ----------------------------------------------------------------


def test_timeout_is_an_error_and_the_rest_still_grade(
    fake_grader: MathGrader, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hung.pid"
    completions = ["a", f"HANG:{pid_file}", "b", "c", "d", "e"]
    references: list[object] = ["a", "x", "b", "zz", "d", "e"]
    started = time.monotonic()
    results = fake_grader.grade_batch(completions, references)
    elapsed = time.monotonic() - started

    assert results[1] == GradeResult(score=None, extracted=None, error="grader timeout after 1s")
    assert results[0] == GradeResult(score=1.0, extracted="a")
    assert results[2] == GradeResult(score=1.0, extracted="b")
    assert results[3] == GradeResult(score=0.0, extracted="c")
    assert results[4:] == [GradeResult(score=1.0, extracted="d"), GradeResult(1.0, "e")]
    # The hung worker was killed (not left sleeping), and the pool with it.
    assert _process_gone(int(pid_file.read_text()))
    assert fake_grader._pool is None
    assert elapsed < 60  # bounded by the timeout, not by the 120 s sleep

    # The grader keeps working: the next batch gets a fresh pool.
    assert fake_grader.grade_batch(["f"], ["f"]) == [GradeResult(score=1.0, extracted="f")]
    assert fake_grader.pool_starts == 2


def test_items_behind_a_hang_run_on_a_fresh_pool(fake_grader: MathGrader, tmp_path: Path) -> None:
    # One worker: everything queued behind the hang must wait for the new pool.
    fake_grader.workers = 1
    completions = [f"HANG:{tmp_path / 'pid'}", "a", "b"]
    results = fake_grader.grade_batch(completions, ["x", "a", "b"])
    assert results == [
        GradeResult(score=None, extracted=None, error="grader timeout after 1s"),
        GradeResult(score=1.0, extracted="a"),
        GradeResult(score=1.0, extracted="b"),
    ]
    assert fake_grader.pool_starts == 2


def test_two_hangs_in_one_batch(fake_grader: MathGrader, tmp_path: Path) -> None:
    completions = [f"HANG:{tmp_path / 'one'}", "a", f"HANG:{tmp_path / 'two'}", "b"]
    results = fake_grader.grade_batch(completions, ["x", "a", "x", "b"])
    assert [r.error for r in results] == [
        "grader timeout after 1s",
        None,
        "grader timeout after 1s",
        None,
    ]
    assert [r.score for r in results] == [None, 1.0, None, 1.0]


def test_a_crashing_worker_only_fails_its_own_item(fake_grader: MathGrader) -> None:
    results = fake_grader.grade_batch(["a", "CRASH", "b", "c"], ["a", "a", "b", "c"])
    assert results[1] == GradeResult(
        score=None, extracted=None, error="math grader worker process died"
    )
    assert [results[i] for i in (0, 2, 3)] == [
        GradeResult(score=1.0, extracted="a"),
        GradeResult(score=1.0, extracted="b"),
        GradeResult(score=1.0, extracted="c"),
    ]


def test_worker_exceptions_and_bad_returns_are_errors(fake_grader: MathGrader) -> None:
    results = fake_grader.grade_batch(
        ["RAISE", "TIMEOUTERROR", "BAD", "ok", "<think>unfinished"],
        ["x", "x", "x", "ok", "x"],
    )
    assert results[0].error == "KeyError: 'no such thing'"
    # A TimeoutError raised by the task is an exception, not a pool timeout.
    assert results[1].error == "TimeoutError: raised by the worker, not a hang"
    assert results[2].error == "math grader worker returned score 2.0, outside [0, 1]"
    assert results[3] == GradeResult(score=1.0, extracted="ok")
    assert results[4] == GradeResult(score=0.0, extracted=None)  # never sent to the pool
    assert fake_grader.pool_starts == 1  # none of this needed a new pool


def test_close_stops_the_workers_and_the_grader_can_restart(fake_grader: MathGrader) -> None:
    from curate.graders.pool import _processes

    assert fake_grader.grade_batch(["a"], ["a"])[0].score == 1.0
    assert fake_grader._pool is not None
    processes = _processes(fake_grader._pool)
    assert len(processes) == 2
    fake_grader.close()
    assert all(not process.is_alive() for process in processes)
    fake_grader.close()  # idempotent
    assert fake_grader.grade_batch(["b"], ["b"])[0].score == 1.0
    assert fake_grader.pool_starts == 2


def test_empty_batch_starts_no_pool(fake_grader: MathGrader) -> None:
    assert fake_grader.grade_batch([], []) == []
    assert fake_grader.grade_batch(["<think>"], ["1"]) == [GradeResult(0.0, None)]
    assert fake_grader.pool_starts == 0


# --- real math_verify ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def math_grader() -> Iterator[MathGrader]:
    pytest.importorskip("math_verify")
    grader = get_grader("math", timeout_s=20.0)
    assert isinstance(grader, MathGrader)
    try:
        yield grader
    finally:
        grader.close()


@pytest.mark.parametrize(
    ("completion", "reference", "score", "extracted"),
    [
        (r"So the result is \boxed{\frac{1}{2}}.", "0.5", 1.0, r"\frac{1}{2}"),
        ("The answer is 0.5", r"\frac{1}{2}", 1.0, "0.5"),
        (r"\boxed{\boxed{3}}", "3", 1.0, "3"),
        (r"\boxed{4}", "3", 0.0, "4"),
        (r"\boxed{4}", 4, 1.0, "4"),
        (r"\boxed{4}", 4.0, 1.0, "4"),
        (r"We get \boxed{(x+1)^2}", "x^2+2x+1", 1.0, "(x+1)^2"),
        (r"答案是 \boxed{\frac{1}{2}}", "1/2", 1.0, r"\frac{1}{2}"),
        (r"\boxed{2}", ["3", "2"], 1.0, "2"),
        (r"<think>maybe \boxed{3}</think> so \boxed{4}", "4", 1.0, "4"),
        (r"<think>maybe \boxed{3}", "3", 0.0, None),
        ("", "3", 0.0, None),
        ("I have no idea.", "3", 0.0, None),
    ],
)
def test_math_verify(
    math_grader: MathGrader,
    completion: str,
    reference: object,
    score: float,
    extracted: str | None,
) -> None:
    [result] = math_grader.grade_batch([completion], [reference])
    assert result == GradeResult(score=score, extracted=extracted)


def test_unparseable_or_missing_reference_is_an_error(math_grader: MathGrader) -> None:
    results = math_grader.grade_batch([r"\boxed{1}", r"\boxed{1}", r"\boxed{1}"], ["", None, "1"])
    assert results[0].score is None
    assert results[0].error is not None and "could not parse the reference" in results[0].error
    assert results[1].error == "reference is missing (None)"
    assert results[2] == GradeResult(score=1.0, extracted="1")


@pytest.mark.parametrize(
    ("completion", "reference", "score"),
    [
        # MATH-500's answer forms: currency, percent, units, \text{} (the class: an answer
        # written with decorations the reference may or may not carry).
        (r"\boxed{5}", r"\$5", 1.0),
        (r"\boxed{\$5}", r"\$5", 1.0),
        (r"\boxed{18.90}", r"\$18.90", 1.0),
        (r"\boxed{6}", r"\$5", 0.0),
        (r"\boxed{50\%}", r"50\%", 1.0),
        (r"\boxed{10}", r"10\text{ cm}", 1.0),
        (r"\boxed{C}", r"\text{(C)}", 1.0),
        (r"\boxed{\text{Devon}}", r"\text{Devon}", 1.0),
    ],
)
def test_math_answers_with_currency_percent_units_and_text(
    math_grader: MathGrader, completion: str, reference: str, score: float
) -> None:
    [result] = math_grader.grade_batch([completion], [reference])
    assert result.error is None and result.score == score
