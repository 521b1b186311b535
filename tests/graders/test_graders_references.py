"""Reference extraction on the layouts real data sets use, and the automatic grader choice."""

from __future__ import annotations

import pytest

from curate.errors import UsageError
from curate.graders.references import (
    EXTRACT_MODES,
    choose_grader,
    extract_reference,
    extract_references,
)

# Written in the layouts of the public data sets (not copied from them).
GSM8K = {
    "g1": "She sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Altogether she sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
    "g2": "He earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n"
    "So 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
    "g3": "The company sold 1,000 + 234 = <<1000+234=1234>>1,234 units.\n#### 1,234",
    "g4": "The temperature fell from 3 to -2, by 5 degrees.\n#### -5",
    "g5": "The tank holds 2,500,000 litres.\n####   2,500,000  ",
}
MATH = {
    "m1": r"Factor: $x^2-5x+6=(x-2)(x-3)$, so the roots are $\boxed{2 \text{ and } 3}$.",
    "m2": r"The area is $\frac{1}{2}bh = \boxed{\frac{15}{2}}$.",
    "m3": r"First $\boxed{x}$ is not the answer. In polar form: "
    r"$\boxed{\left( 3, \frac{\pi}{2} \right)}$.",
    "m4": r"So the sum is $\boxed{{1,\!000}}$.",
    "m5": r"Counting, we get $\boxed{12}$.",
    "m6": r"Hence $\boxed{\boxed{\sqrt{2}}}$.",
}
MULTIPLE_CHOICE = {"q1": "(B)", "q2": "B", "q3": "C)", "q4": "D.", "q5": "a", "q6": " (e) "}
ANSWER_IS = {
    "a1": "Rationale: 4 boxes of 5 apples make 20 apples.\nThe answer is (B).",
    "a2": "x = 5 so 2x = 10.\nThe answer is C",
    "a3": "Speed = 60/1.5 = 40 km/h.\nThe answer is 40.",
    "a4": "So the ratio is 3:4.\nAnswer: $\\frac{3}{4}$",
}


def test_gsm8k_layout() -> None:
    extraction = extract_references(GSM8K)
    assert extraction.mode == "gsm8k"
    assert extraction.references == {
        "g1": "72",
        "g2": "10",
        "g3": "1234",
        "g4": "-5",
        "g5": "2500000",
    }
    assert (extraction.applied, extraction.total, extraction.unread) == (5, 5, [])
    assert extraction.summary == (
        "references: GSM8K '#### N' answers (chosen automatically), read from 5 of 5 references"
    )
    choice = choose_grader(extraction.references)
    assert choice.spec == "numeric"
    assert choice.reason == "numeric: 5 of 5 references are numbers"


def test_math_layout_takes_the_last_box() -> None:
    extraction = extract_references(MATH)
    assert extraction.mode == "boxed"
    assert extraction.references == {
        "m1": r"2 \text{ and } 3",
        "m2": r"\frac{15}{2}",
        "m3": r"\left( 3, \frac{\pi}{2} \right)",
        "m4": r"{1,\!000}",
        "m5": "12",
        "m6": r"\sqrt{2}",
    }
    assert choose_grader(extraction.references).spec == "math"


def test_multiple_choice_letters() -> None:
    extraction = extract_references(MULTIPLE_CHOICE)
    assert extraction.mode == "none"
    assert list(extraction.references.values()) == ["B", "B", "C", "D", "A", "E"]
    choice = choose_grader(extraction.references)
    assert choice.spec == "choice"
    assert choice.reason == "choice: 6 of 6 references are multiple-choice letters"


def test_final_answer_line() -> None:
    extraction = extract_references(ANSWER_IS)
    assert extraction.mode == "answer-is"
    assert extraction.references == {"a1": "B", "a2": "C", "a3": "40", "a4": r"\frac{3}{4}"}


def test_plain_values_are_kept() -> None:
    references: dict[str, object] = {"1": "Paris", "2": " 42 ", "3": 7, "4": ["x", "y"]}
    extraction = extract_references(references)
    assert extraction.mode == "none"
    assert extraction.references == {"1": "Paris", "2": "42", "3": 7, "4": ["x", "y"]}
    assert extraction.summary == "references used as given (4 references; chosen automatically)"
    assert choose_grader(extraction.references).spec == "exact"


def test_auto_needs_most_references_to_fit_a_layout() -> None:
    # One reference with a box among plain ones is not a MATH-style data set.
    references = {"1": "Paris", "2": "Rome", "3": r"\boxed{Oslo}"}
    assert extract_references(references).mode == "none"
    # Most do: the others are kept as given and counted.
    references = {"1": "a\n#### 1", "2": "b\n#### 2", "3": "3"}
    extraction = extract_references(references)
    assert extraction.mode == "gsm8k"
    assert extraction.references == {"1": "1", "2": "2", "3": "3"}
    assert extraction.unread == ["3"]
    assert extraction.summary.endswith("read from 2 of 3 references; 1 kept as given")


def test_forced_modes() -> None:
    assert extract_reference("It costs $1,200 in total, or 3 payments", "last-number") == "3"
    assert extract_reference("Total: 1,234.5 dollars", "last-number") == "1234.5"
    assert extract_reference("no box here", "boxed") is None
    assert extract_reference(r"a \boxed{5}", "none") == r"a \boxed{5}"
    assert extract_reference(12, "gsm8k") == 12  # non-strings pass through
    forced = extract_references({"1": "x\n#### 5", "2": r"\boxed{6}"}, "boxed")
    assert (forced.mode, forced.requested, forced.references) == (
        "boxed",
        "boxed",
        {"1": "x\n#### 5", "2": "6"},
    )
    assert "(as asked)" in forced.summary


def test_modes_and_bad_mode() -> None:
    assert EXTRACT_MODES == ("auto", "gsm8k", "boxed", "answer-is", "last-number", "none")
    with pytest.raises(UsageError, match="unknown reference extraction 'fuzzy'"):
        extract_references({}, "fuzzy")
    with pytest.raises(UsageError):
        extract_reference("x", "auto")


@pytest.mark.parametrize(
    ("references", "spec"),
    [
        (["1", "2.5", "-3", "1,234", "3/4", 7], "numeric"),
        (["1", r"\frac{1}{2}", "x^2+1", "2x+1", "(1, -2)", r"3\sqrt{2}"], "math"),
        (["A", "(B)", "c"], "choice"),
        (["Paris", "Rome", "42"], "exact"),
        (["forty two", "x"], "exact"),
        ([None, "", "5"], "numeric"),  # missing references are the check's business
        ([], "exact"),
    ],
)
def test_choose_grader(references: list[object], spec: str) -> None:
    assert choose_grader({str(i): ref for i, ref in enumerate(references)}).spec == spec


def test_one_odd_reference_does_not_send_a_data_set_to_exact() -> None:
    references: dict[str, object] = {str(i): str(i) for i in range(199)}
    references["odd"] = "see above"
    choice = choose_grader(references)
    assert choice.spec == "numeric"
    assert choice.reason == "numeric: 199 of 200 references are numbers"
    references["odd2"] = "see below"
    references["odd3"] = "see there"  # 3 of 202 is more than 1%
    assert choose_grader(references).spec == "exact"
