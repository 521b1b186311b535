"""The `choice` grader: the letter a completion chose against the reference letter."""

from __future__ import annotations

import pytest

from curate.errors import UsageError
from curate.graders import GradeResult, get_grader


@pytest.mark.parametrize(
    ("completion", "extracted"),
    [
        ("The answer is (B)", "B"),
        ("B", "B"),
        ("**B**", "B"),
        ("(B).", "B"),
        ("Answer: B) 42 apples", "B"),
        ("**Answer:** B", "B"),
        (r"So $\boxed{B}$", "B"),
        (r"$\boxed{\text{(B)}}$", "B"),
        ("B) because the others are too small", "B"),
        ("Option A is wrong since 3 > 2; the correct option is B.", "B"),
        ("answer: (b)", "B"),
        ("Let me compare (A) and (C).\nOnly (B) fits, so it is (B)", "B"),
        ("<think>maybe (A)</think>The answer is B.", "B"),
    ],
)
def test_chosen_letter(completion: str, extracted: str) -> None:
    grader = get_grader("choice")
    assert grader.grade_batch([completion], ["(B)"]) == [GradeResult(1.0, extracted)]


@pytest.mark.parametrize(
    "completion",
    ["A prime number is one with two divisors.", "I think it is not clear.", "", "42"],
)
def test_no_letter_is_wrong_not_an_error(completion: str) -> None:
    assert get_grader("choice").grade_batch([completion], ["A"]) == [GradeResult(0.0, None)]


def test_wrong_letter_and_alternatives() -> None:
    grader = get_grader("choice")
    results = grader.grade_batch(["The answer is (C)", "C", "<think>(B"], ["B", ["b", "C"], "B"])
    assert results == [GradeResult(0.0, "C"), GradeResult(1.0, "C"), GradeResult(0.0, None)]


def test_a_reference_that_is_no_letter_is_an_error_row() -> None:
    [result] = get_grader("choice").grade_batch(["B"], ["Paris"])
    assert result == GradeResult(None, None, "reference is not a choice letter: 'Paris'")


def test_spec() -> None:
    assert get_grader(" Choice ").name == "Choice"
    with pytest.raises(UsageError, match="'choice' takes no options"):
        get_grader("choice:strict")
