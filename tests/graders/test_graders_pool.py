"""Graders that run code curate does not control fail loudly, and score right from any
thread: the shared worker pool behind `python:`, `math`, `verl` and `trl:`.

math_verify times itself with ``signal.alarm``, which only works in a process's main
thread; elsewhere it raises, and reward functions that catch every exception (as
verl's do) turn that into a silent 0. Curate runs these calls in worker processes'
main threads, so the caller's thread does not matter.
"""

from __future__ import annotations

import multiprocessing
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from curate.graders import GradeResult, get_grader
from curate.graders.base import grade

# A reward in the style of verl's math_verify scorer: math_verify with its default
# (signal-based) timeouts, and any exception scored 0.
SILENT_REWARD = textwrap.dedent(
    """
    from math_verify import parse, verify

    def reward(completion, reference):
        try:
            return float(verify(parse("$" + reference + "$"), parse(completion)))
        except Exception:
            return 0.0
    """
)

USER_CODE = textwrap.dedent(
    """
    import os, time

    def misbehave(completion, reference):
        if completion == "hang":
            time.sleep(60)
        if completion == "crash":
            os._exit(3)
        if completion == "raise":
            raise ValueError("no")
        return 1.0
    """
)

CORRECT = [r"The answer is \boxed{\frac{1}{2}}", r"So $\boxed{68}$"]
REFERENCES = [r"\frac{1}{2}", "68"]
CHAT = [{"role": "user", "content": "q"}]


def grade_every_way(reward_file: str) -> dict[str, list[float | None]]:
    """Correct answers through math, python: (math_verify inside) and trl:accuracy_reward."""
    specs = {
        "math": "math",
        "python": f"python:{reward_file}:reward",
        "trl": "trl:trl.rewards:accuracy_reward",
    }
    rows = [{"prompt": CHAT, "solution": f"${ref}$"} for ref in REFERENCES]
    scores: dict[str, list[float | None]] = {}
    for name, spec in specs.items():
        grader = get_grader(spec, timeout_s=60.0, workers=1)
        try:
            results = grade(grader, CORRECT, REFERENCES, rows)
        finally:
            grader.close()
        scores[name] = [result.score for result in results]
    return scores


def _in_child(reward_file: str, queue: Any) -> None:
    queue.put(grade_every_way(reward_file))


def _in_thread(reward_file: str) -> dict[str, list[float | None]]:
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(grade_every_way(reward_file)))
    thread.start()
    thread.join(300)
    return box[0]


def _in_process(reward_file: str) -> dict[str, list[float | None]]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_in_child, args=(reward_file, queue))
    process.start()
    try:
        return queue.get(timeout=300)  # type: ignore[no-any-return]
    finally:
        process.join(30)


@pytest.fixture
def reward_file(tmp_path: Path) -> str:
    pytest.importorskip("math_verify")
    path = tmp_path / "silent_reward.py"
    path.write_text(SILENT_REWARD)
    return str(path)


def test_the_hazard_a_silent_zero_outside_the_main_thread(reward_file: str) -> None:
    """What happens without curate's workers: the same correct answer scores 0."""
    namespace: dict[str, Any] = {}
    exec(compile(SILENT_REWARD, reward_file, "exec"), namespace)
    reward: Callable[[str, str], float] = namespace["reward"]
    assert reward(CORRECT[0], REFERENCES[0]) == 1.0  # main thread: fine
    box: list[float] = []
    thread = threading.Thread(target=lambda: box.append(reward(CORRECT[0], REFERENCES[0])))
    thread.start()
    thread.join(60)
    assert box == [0.0]  # a worker thread: signal.alarm raised, the reward said 0


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(grade_every_way, id="main-thread"),
        pytest.param(_in_thread, id="worker-thread"),
        pytest.param(_in_process, id="worker-process"),
    ],
)
def test_correct_answers_score_one_from_every_path(
    reward_file: str, path: Callable[[str], dict[str, list[float | None]]]
) -> None:
    assert path(reward_file) == {"math": [1.0, 1.0], "python": [1.0, 1.0], "trl": [1.0, 1.0]}


def test_user_code_that_hangs_crashes_or_raises_is_an_error_row(tmp_path: Path) -> None:
    path = tmp_path / "user_code.py"
    path.write_text(USER_CODE)
    grader = get_grader(f"python:{path}:misbehave", timeout_s=1.0, workers=2)
    try:
        results = grader.grade_batch(["ok", "hang", "crash", "raise", "ok"], ["r"] * 5)
        assert results == [
            GradeResult(1.0, None),
            GradeResult(None, None, "grader timeout after 1s"),
            GradeResult(None, None, "python grader worker process died"),
            GradeResult(None, None, "ValueError: no"),
            GradeResult(1.0, None),
        ]
        # The grader keeps going on a fresh pool.
        assert grader.grade_batch(["ok"], ["r"]) == [GradeResult(1.0, None)]
    finally:
        grader.close()


def test_an_unclosed_grader_leaves_no_worker_behind(tmp_path: Path) -> None:
    import gc

    from curate.graders.pool import _processes

    path = tmp_path / "user_code.py"
    path.write_text(USER_CODE)
    grader = get_grader(f"python:{path}:misbehave", workers=1)
    assert grader.grade_batch(["ok"], ["r"]) == [GradeResult(1.0, None)]
    processes = _processes(grader._pool)  # type: ignore[attr-defined]
    del grader
    gc.collect()
    assert processes and not any(process.is_alive() for process in processes)
