"""The `exact` and `regex:PATTERN` graders."""

from __future__ import annotations

import time

import pytest

from curate.graders import GradeResult, get_grader


def grade(spec: str, completion: str, reference: object) -> GradeResult:
    [result] = get_grader(spec).grade_batch([completion], [reference])
    return result


@pytest.mark.parametrize(
    ("completion", "reference", "score", "extracted"),
    [
        ("Paris", "paris", 1.0, "paris"),
        ('  "Paris."  ', "Paris", 1.0, "paris"),
        ("The answer is Paris.", "Paris", 1.0, "paris"),
        ("The answer is Paris. It is in France.", "Paris", 1.0, "paris"),
        ("**Answer:** Paris", "Paris", 1.0, "paris"),
        (r"So \boxed{\text{Paris}}", "Paris", 1.0, "paris"),
        # No marker: the whole completion is the answer, so chatter is wrong.
        ("I think it's Paris", "Paris", 0.0, "i think it's paris"),
        ("Straße", "STRASSE", 1.0, "strasse"),
        ("ＰＡＲＩＳ", "paris", 1.0, "paris"),
        ("New   York\n City", "new york city", 1.0, "new york city"),
        ("🙂", "🙂", 1.0, "🙂"),
        ("The answer is 1,234", "1,234", 1.0, "1,234"),
        ("The answer is 1,234", "1234", 0.0, "1,234"),  # exact is not numeric
        ("5", 5.0, 1.0, "5"),  # an integral float reference is "5", not "5.0"
        ("new york", ["NYC", "New York"], 1.0, "new york"),
        ("", "x", 0.0, None),
        ("   \n ", "x", 0.0, None),
        ("<think>Paris</think>London", "London", 1.0, "london"),
        ("<think>Paris</think>London", "Paris", 0.0, "london"),
        ("<think>it is Paris", "Paris", 0.0, None),
    ],
)
def test_exact(completion: str, reference: object, score: float, extracted: str | None) -> None:
    assert grade("exact", completion, reference) == GradeResult(score=score, extracted=extracted)


def test_exact_missing_reference_is_an_error_for_that_rollout_only() -> None:
    results = get_grader("exact").grade_batch(["a", "b", "c"], ["a", None, "c"])
    assert [r.score for r in results] == [1.0, None, 1.0]
    assert results[1].error == "reference is missing (None)"


def test_non_string_completion_is_an_error_not_a_crash() -> None:
    completions: list[object] = ["a", None, "c"]
    results = get_grader("exact").grade_batch(completions, ["a", "b", "c"])  # type: ignore[arg-type]
    assert results[0].score == 1.0 and results[2].score == 1.0
    assert results[1].score is None
    assert results[1].error is not None and results[1].error.startswith("AttributeError: ")


def test_length_mismatch_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="2 completions but 1 references"):
        get_grader("exact").grade_batch(["a", "b"], ["a"])


@pytest.mark.parametrize(
    ("spec", "completion", "reference", "score", "extracted"),
    [
        # The last match wins.
        (r"regex:ANSWER:\s*(\w+)", "ANSWER: foo ... ANSWER: bar", "bar", 1.0, "bar"),
        (r"regex:ANSWER:\s*(\w+)", "ANSWER: foo ... ANSWER: bar", "foo", 0.0, "bar"),
        # No groups: the whole match.
        (r"regex:\d+", "3 then 42", "42", 1.0, "42"),
        (r"regex:\d+", "no digits", "42", 0.0, None),
        # Compared with exact normalisation...
        (r"regex:is (.+)$", 'it is "Paris."', "paris", 1.0, '"Paris."'),
        # ...or numerically when both sides are numbers.
        (r"regex:=\s*(\S+)", "x = 1,234.0", 1234, 1.0, "1,234.0"),
        (r"regex:=\s*(\S+)", "x = 12%", "0.12", 1.0, "12%"),
        (r"regex:=\s*(\S+)", "x = 1,234.0", "1235", 0.0, "1,234.0"),
        # An optional group that did not take part in the match.
        (r"regex:answer (\d+)|none", "none", "none", 0.0, None),
        # The pattern may itself contain ':'; inline flags work.
        (r"regex:(?i)final: (\w+)", "FINAL: Yes", "yes", 1.0, "Yes"),
        (r"regex:(?s)<a>(.*)</a>", "<a>multi\nline</a>", "multi line", 1.0, "multi\nline"),
        (r"regex:(\w+)", "<think>wrong</think>right", "right", 1.0, "right"),
        (r"regex:(\w+)", "<think>unfinished", "unfinished", 0.0, None),
        (r"regex:(\w+)", "", "x", 0.0, None),
        (r"regex:(\w+)", "café", "CAFÉ", 1.0, "café"),
    ],
)
def test_regex(
    spec: str, completion: str, reference: object, score: float, extracted: str | None
) -> None:
    assert grade(spec, completion, reference) == GradeResult(score=score, extracted=extracted)


DEGENERATE = {
    "spaces": " " * 50_000 + "x",
    "bracket then spaces": "(" + " " * 50_000 + "x",
    "answer then spaces": "the answer is" + " " * 50_000 + "x",
    "unclosed boxes": "\\boxed{" * 7_000,
    "deeply nested boxes": "\\boxed{" * 3_000 + "5" + "}" * 3_000,
    "asterisks": "*" * 50_000,
    "gsm8k marker then spaces": "####" + " " * 50_000,
    "one huge number": "9" * 50_000,
    "unclosed think": "<think>" + "a" * 50_000,
}


@pytest.mark.parametrize("spec", ["exact", "numeric", r"regex:(\d+)"])
def test_degenerate_completions_grade_in_linear_time(spec: str) -> None:
    # Repetition loops are a real model failure; a quadratic scan would take minutes here.
    grader = get_grader(spec)
    started = time.monotonic()
    results = grader.grade_batch(list(DEGENERATE.values()), ["5"] * len(DEGENERATE))
    assert time.monotonic() - started < 10
    assert all(result.error is None for result in results)
    assert results[list(DEGENERATE).index("deeply nested boxes")].score == 1.0
