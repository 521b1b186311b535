"""User graders: ``python:FILE.py:FUNCTION`` and ``python:module:function``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from curate.errors import UsageError
from curate.graders import GradeResult, get_grader

USER_GRADERS = textwrap.dedent(
    """
    def equal(completion, reference):
        return completion.strip() == str(reference)

    def half(completion, reference):
        return 0.5

    def two(completion, reference):
        return 2.0

    def negative(completion, reference):
        return -0.1

    def nan(completion, reference):
        return float("nan")

    def text(completion, reference):
        return "yes"

    def nothing(completion, reference):
        return None

    def pair(completion, reference):
        return (1.0, "x")

    def boom(completion, reference):
        if completion == "boom":
            raise ValueError("bad\\nthing " + "x" * 500)
        return 1

    def seen(completion, reference):
        return completion == "answer" and reference == ["a", 1]

    not_callable = 3

    async def coroutine(completion, reference):
        return 1.0

    def one_argument(completion):
        return 1.0
    """
)


@pytest.fixture
def grader_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_graders.py"
    path.write_text(USER_GRADERS)
    return path


def grade_with(spec: str, completions: list[str], references: list[object]) -> list[GradeResult]:
    grader = get_grader(spec)
    assert grader.name == spec
    return grader.grade_batch(completions, references)


def test_bool_and_float_returns(grader_file: Path) -> None:
    assert grade_with(f"python:{grader_file}:equal", ["5", "6"], [5, 5]) == [
        GradeResult(score=1.0, extracted=None),
        GradeResult(score=0.0, extracted=None),
    ]
    assert grade_with(f"python:{grader_file}:half", ["x"], ["y"])[0].score == 0.5
    assert grade_with(f"python:{grader_file}:boom", ["fine"], ["y"])[0].score == 1.0  # int 1


@pytest.mark.parametrize(
    ("function", "error"),
    [
        ("two", "python grader returned 2.0, outside [0, 1]"),
        ("negative", "python grader returned -0.1, outside [0, 1]"),
        ("nan", "python grader returned NaN; expected a float in [0, 1] or a bool"),
        ("text", "python grader returned str; expected a float in [0, 1] or a bool"),
        ("nothing", "python grader returned NoneType; expected a float in [0, 1] or a bool"),
        ("pair", "python grader returned tuple; expected a float in [0, 1] or a bool"),
    ],
)
def test_bad_return_values_are_errors(grader_file: Path, function: str, error: str) -> None:
    [result] = grade_with(f"python:{grader_file}:{function}", ["x"], ["y"])
    assert result == GradeResult(score=None, extracted=None, error=error)


def test_exception_in_user_function_is_one_line_error(grader_file: Path) -> None:
    results = grade_with(f"python:{grader_file}:boom", ["ok", "boom", "ok"], [1, 2, 3])
    assert [r.score for r in results] == [1.0, None, 1.0]
    error = results[1].error
    assert error is not None
    assert error.startswith("ValueError: bad thing xxx")
    assert "\n" not in error
    assert len(error) <= 200


def test_think_is_stripped_and_reference_passed_as_is(grader_file: Path) -> None:
    results = grade_with(
        f"python:{grader_file}:seen",
        ["<think>hmm</think>answer", "<think>never ends"],
        [["a", 1], ["a", 1]],
    )
    assert results == [
        GradeResult(score=1.0, extracted=None),
        GradeResult(score=0.0, extracted=None),  # unclosed think: wrong, function not called
    ]


def test_module_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "curate_test_user_module.py").write_text(USER_GRADERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        [result] = grade_with("python:curate_test_user_module:equal", ["7"], [7])
        assert result.score == 1.0
    finally:
        sys.modules.pop("curate_test_user_module", None)
    # A standard-library function with the right shape works too.
    assert grade_with("python:operator:eq", ["a", "b"], ["a", "a"]) == [
        GradeResult(score=1.0, extracted=None),
        GradeResult(score=0.0, extracted=None),
    ]


def test_numpy_returns(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    path = tmp_path / "np_graders.py"
    path.write_text(
        "import numpy as np\n"
        "def as_bool(c, r):\n    return np.bool_(c == r)\n"
        "def as_float(c, r):\n    return np.float32(0.25)\n"
    )
    assert grade_with(f"python:{path}:as_bool", ["a", "b"], ["a", "a"]) == [
        GradeResult(score=1.0, extracted=None),
        GradeResult(score=0.0, extracted=None),
    ]
    assert grade_with(f"python:{path}:as_float", ["a"], ["a"])[0].score == 0.25


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        ("", "expected python:FILE.py:FUNCTION"),
        ("missing.py", "expected python:FILE.py:FUNCTION"),
        (":equal", "expected python:FILE.py:FUNCTION"),
        ("{file}:", "expected python:FILE.py:FUNCTION"),
        ("{file}:1bad", "is not a function name"),
        ("{dir}/missing.py:equal", "file not found"),
        ("{file}:absent", "has no function 'absent'"),
        ("{file}:not_callable", "is not callable"),
        ("{file}:coroutine", "is async"),
        ("{file}:one_argument", "must accept (completion, reference)"),
        ("curate_no_such_module_xyz:fn", "no module named 'curate_no_such_module_xyz'"),
        ("not a module:fn", "is not a module name or a .py file"),
        ("{broken}:fn", "error while loading"),
        ("{raising}:fn", "error while loading"),
    ],
)
def test_bad_python_specs(grader_file: Path, suffix: str, message: str) -> None:
    broken = grader_file.parent / "broken.py"
    broken.write_text("def fn(c, r):\n    return (\n")
    raising = grader_file.parent / "raising.py"
    raising.write_text("raise RuntimeError('no import for you')\n")
    spec = "python:" + suffix.format(
        file=grader_file, dir=grader_file.parent, broken=broken, raising=raising
    )
    with pytest.raises(UsageError) as caught:
        get_grader(spec)
    assert message in str(caught.value)
    assert repr(spec.strip()) in str(caught.value)  # the message names the spec


def test_two_files_with_the_same_name_do_not_clash(tmp_path: Path) -> None:
    first = tmp_path / "a" / "graders.py"
    second = tmp_path / "b" / "graders.py"
    for path, value in ((first, "0.25"), (second, "0.75")):
        path.parent.mkdir()
        path.write_text(f"def score(c, r):\n    return {value}\n")
    assert grade_with(f"python:{first}:score", ["x"], ["y"])[0].score == 0.25
    assert grade_with(f"python:{second}:score", ["x"], ["y"])[0].score == 0.75
