"""Spec parsing, the default spec, and the public contract."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

import curate.graders as graders
from curate.errors import MissingExtraError, UsageError
from curate.graders import GRADER_NAMES, Grader, GradeResult, default_grader_spec, get_grader


def test_public_api() -> None:
    assert set(graders.__all__) == {
        "GRADER_NAMES",
        "GradeResult",
        "Grader",
        "default_grader_spec",
        "get_grader",
    }
    assert GRADER_NAMES == (
        "exact",
        "numeric",
        "math",
        "regex:PATTERN",
        "python:FILE.py:FUNCTION",
        "python:module:function",
        # Added later: multiple choice and the trainers' own rewards.
        "choice",
        "verl",
        "verl:FILE.py:FUNCTION",
        "trl:FILE.py:FUNCTION",
        "trl:module:function",
        # Added later: an LLM judge; programs run against the sample's tests.
        "judge",
        "code",
        "code:score=fraction",
        # Added later: a reward model served over HTTP.
        "reward-model",
        # Added later: DRO's reasoning reflection reward (no verifier).
        "r3",
        "r3:tau=X",
    )


def test_grade_result_invariants() -> None:
    assert GradeResult(score=0.5, extracted="x").error is None
    assert GradeResult(score=None, extracted=None, error="boom").score is None
    with pytest.raises(ValueError):
        GradeResult(score=None, extracted=None)
    with pytest.raises(ValueError):
        GradeResult(score=1.0, extracted=None, error="both")
    with pytest.raises(ValueError):
        GradeResult(score=1.5, extracted=None)
    with pytest.raises(ValueError):
        GradeResult(score=float("nan"), extracted=None)
    result = GradeResult(score=1.0, extracted="a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 0.0  # type: ignore[misc]
    assert not hasattr(result, "__dict__")  # slots


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("exact", "ExactGrader"),
        ("  EXACT ", "ExactGrader"),
        ("numeric", "NumericGrader"),
        ("numeric:rel_tol=1e-3", "NumericGrader"),
        ("numeric:abs_tol=0.5", "NumericGrader"),
        ("numeric: rel_tol = 0 , abs_tol = 1", "NumericGrader"),
        ("regex:(\\d+)", "RegexGrader"),
        ("Regex:a:b", "RegexGrader"),
    ],
)
def test_good_specs(spec: str, kind: str) -> None:
    grader = get_grader(spec)
    assert type(grader).__name__ == kind
    assert grader.name == spec.strip()
    assert isinstance(grader, Grader)
    grader.close()
    grader.close()  # idempotent


def test_numeric_spec_options_reach_the_grader() -> None:
    from curate.graders.simple import NumericGrader

    grader = get_grader("numeric:rel_tol=0,abs_tol=0.5")
    assert isinstance(grader, NumericGrader)
    assert (grader.tolerance.rel_tol, grader.tolerance.abs_tol) == (0.0, 0.5)


@pytest.mark.parametrize(
    "spec",
    [
        "bogus",
        "exact:strict",
        "math:fast",
        "regex:",
        "regex:(",
        "regex:[a-",
        "numeric:",
        "numeric:rel_tol",
        "numeric:rel_tol=abc",
        "numeric:tol=1",
        "numeric:rel_tol=-1",
        "numeric:rel_tol=nan",
        "numeric:abs_tol=inf",
        "numeric:rel_tol=1,rel_tol=2",
        "python",
        "python:",
    ],
)
def test_bad_specs_name_the_spec(spec: str) -> None:
    with pytest.raises(UsageError) as caught:
        get_grader(spec)
    assert repr(spec) in str(caught.value)


@pytest.mark.parametrize("spec", ["", "   "])
def test_empty_spec(spec: str) -> None:
    with pytest.raises(UsageError, match="empty grader spec"):
        get_grader(spec)


def test_unknown_spec_lists_the_choices() -> None:
    with pytest.raises(UsageError, match="regex:PATTERN"):
        get_grader("fuzzy")


def test_math_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def no_math_verify(name: str, package: str | None = None) -> object:
        return None if name == "math_verify" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", no_math_verify)
    with pytest.raises(MissingExtraError, match=r"pip install 'curate\[math\]'"):
        get_grader("math")


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan"), float("inf")])
def test_math_timeout_must_be_positive(timeout_s: float) -> None:
    pytest.importorskip("math_verify")
    with pytest.raises(UsageError, match="timeout"):
        get_grader("math", timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("references", "spec"),
    [
        (
            [1, 2.5, "3", "1,234", "12%", "$5", "(45)", "3/4", "-7", "1e-5", "$1.2 million"],
            "numeric",
        ),
        ([0.1, 2], "numeric"),
        (["1", "two"], "exact"),
        (["5 kg"], "exact"),  # a number with a unit is not "a number"
        ([True, False], "exact"),
        ([float("nan")], "exact"),
        ([None], "exact"),
        ([[1, 2]], "exact"),
        (["Paris"], "exact"),
        ([], "exact"),
    ],
)
def test_default_grader_spec(references: list[object], spec: str) -> None:
    assert default_grader_spec(references) == spec
    assert default_grader_spec(tuple(references)) == spec
