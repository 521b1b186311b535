"""Number extraction and the `numeric` grader."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from curate.graders import GradeResult, get_grader
from curate.graders.numeric import (
    Tolerance,
    extract_final_number,
    find_numbers,
    numbers_match,
    parse_number,
    reference_number,
)


def grade(completion: str, reference: object, spec: str = "numeric") -> GradeResult:
    grader = get_grader(spec)
    try:
        [result] = grader.grade_batch([completion], [reference])
    finally:
        grader.close()
    return result


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,234.5", "1234.5"),
        ("-5", "-5"),
        ("−7.5", "-7.5"),  # Unicode minus
        ("(45)", "-45"),
        ("($1,200)", "-1200"),
        ("$-5", "-5"),
        ("-$5", "-5"),
        ("€3,000.50", "3000.50"),
        ("£7", "7"),
        ("3/4", "0.75"),
        (r"\frac{3}{4}", "0.75"),
        (r"\dfrac34", "0.75"),
        ("1e-5", "0.00001"),
        ("2.5E3", "2500"),
        (r"1.2 \times 10^{5}", "120000"),
        ("1.2 × 10^5", "120000"),
        ("12%", "12"),
        (r"12\%", "12"),
        ("12 percent", "12"),
        ("$1.2 million", "1.2"),
        (".5", "0.5"),
        ("٤٢", "42"),  # Arabic-Indic digits
        ("４２", "42"),  # full-width digits
        ("$5$", "5"),
        ("42.", "42"),
    ],
)
def test_parse_number_values(text: str, value: str) -> None:
    number = parse_number(text)
    assert number is not None
    assert number.value == Decimal(value)


@pytest.mark.parametrize("text", ["", "abc", "5 apples and 6 pears", "1,2345", "3/0", "--5"])
def test_parse_number_rejects(text: str) -> None:
    assert parse_number(text) is None


def test_percent_and_scale_readings() -> None:
    percent = parse_number("12%")
    assert percent is not None and percent.percent
    assert percent.readings() == {Decimal(12), Decimal("0.12")}
    scaled = parse_number("$1.2 million")
    assert scaled is not None
    assert scaled.readings() == {Decimal("1.2"), Decimal(1200000)}
    attached = parse_number("5k")
    assert attached is not None and Decimal(5000) in attached.readings()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("x2 and CO2", []),  # glued to letters
        ("v1.2.3", []),
        ("f(3)", ["3"]),  # brackets that are not an accounting negative
        ("3-4", ["3", "4"]),  # a range, not minus four
        ("1,2,3", ["1", "2", "3"]),
        ("3.2 kg", ["3.2"]),
        ("5kg", ["5"]),  # "k" of "kg" is not thousand
        ("(5 apples", ["5"]),
    ],
)
def test_find_numbers_texts(text: str, found: list[str]) -> None:
    assert [number.text for number in find_numbers(text)] == found


def test_extract_prefers_the_answer_marker_then_the_last_number() -> None:
    marked = extract_final_number("Step 1: 2+3=5. The answer is 7 apples, not 9.")
    assert marked is not None and marked.text == "7"
    unmarked = extract_final_number("I computed 3, then 4, so 12")
    assert unmarked is not None and unmarked.text == "12"
    boxed = extract_final_number(r"The answer is 5. \boxed{6}")
    assert boxed is not None and boxed.text == "6"
    assert extract_final_number("no digits here") is None


def test_tolerance() -> None:
    pi = parse_number("3.14159")
    assert pi is not None
    ref = reference_number(3.1416)
    assert ref is not None
    assert numbers_match(pi, ref, Tolerance())
    assert not numbers_match(pi, ref, Tolerance(rel_tol=0))
    with pytest.raises(ValueError):
        Tolerance(rel_tol=float("nan"))


def test_reference_number_types() -> None:
    assert reference_number(True) is None  # a bool is not a number here
    assert reference_number(float("nan")) is None
    assert reference_number(float("inf")) is None
    assert reference_number(None) is None
    assert reference_number([1]) is None
    half = reference_number(Fraction(1, 2))
    assert half is not None and half.value == Decimal("0.5")
    tenth = reference_number(0.1)
    assert tenth is not None and tenth.value == Decimal("0.1")  # not 0.1000000000000000055...
    assert reference_number("5 kg", strict=True) is None
    kg = reference_number("5 kg")
    assert kg is not None and kg.value == 5
    assert reference_number("between 3 and 5") is None


@pytest.mark.parametrize(
    ("completion", "reference", "score", "extracted"),
    [
        ("The answer is 1,234", "1234", 1.0, "1,234"),
        ("The answer is 1,234.", 1234, 1.0, "1,234"),
        ("Revenue was $1.2 million", "1200000", 1.0, "$1.2 million"),
        ("Revenue was $1.2 million", 1.2, 1.0, "$1.2 million"),  # table "in millions"
        ("$1.2 million", "$1.2 million", 1.0, "$1.2 million"),
        ("The net loss was (45)", "-45", 1.0, "(45)"),
        ("The net loss was -45", "(45)", 1.0, "-45"),
        ("Growth: 12%", "0.12", 1.0, "12%"),
        ("Growth: 0.12", "12%", 1.0, "0.12"),
        ("Growth: 12", "12%", 1.0, "12"),
        ("Growth: 12 percent", 0.12, 1.0, "12 percent"),
        ("Growth: 12", "0.12", 0.0, "12"),  # no % anywhere: no rescaling
        ("Growth: 0.12", 12, 0.0, "0.12"),
        (r"So \boxed{\frac{1}{2}}", "0.5", 1.0, "1/2"),
        ("It is 3/4 of the cake", 0.75, 1.0, "3/4"),
        ("It weighs 3.2 kg", 3.2, 1.0, "3.2"),
        ("About 5 million people", 5000000, 1.0, "5 million"),
        ("Worth $2B", 2_000_000_000, 1.0, "$2B"),
        ("Mass 5kg", 5000, 0.0, "5"),
        ("The answer is −7", -7, 1.0, "-7"),
        ("The answer is -0", 0, 1.0, "-0"),
        ("1.2e-5", "0.000012", 1.0, "1.2e-5"),
        (r"1.2 \times 10^{5}", 120000, 1.0, r"1.2 \times 10^{5}"),
        ("€3,000.50", 3000.5, 1.0, "€3,000.50"),
        ("答案是 ٤٢", 42, 1.0, "٤٢"),
        ("x2 and CO2", 2, 0.0, None),
        ("", 5, 0.0, None),
        ("I don't know", 5, 0.0, None),
        ("3.14159", 3.1416, 1.0, "3.14159"),
        ("3.2", 3.1416, 0.0, "3.2"),
        ("The answer is 4", [3, "4"], 1.0, "4"),  # any of several references
        ("<think>the answer is 5</think>The answer is 6", 6, 1.0, "6"),
        ("<think>the answer is 5</think>The answer is 6", 5, 0.0, "6"),
        ("<think>the answer is 5", 5, 0.0, None),  # never finished thinking: wrong
        ("scratch work 5</think> 6", 6, 1.0, "6"),
    ],
)
def test_numeric_grader(
    completion: str, reference: object, score: float, extracted: str | None
) -> None:
    assert grade(completion, reference) == GradeResult(score=score, extracted=extracted)


def test_huge_numbers_compare_exactly() -> None:
    big = "1" + "0" * 400
    double = "2" + "0" * 400
    off_by_one = "1" + "0" * 399 + "1"
    # As floats both would be inf and compare equal.
    assert grade(f"The answer is {big}", double).score == 0.0
    assert grade(f"The answer is {big}", big).score == 1.0
    # Within the default relative tolerance, but not with none at all.
    assert grade(f"The answer is {big}", off_by_one).score == 1.0
    assert grade(f"The answer is {big}", off_by_one, "numeric:rel_tol=0").score == 0.0
    assert grade("The answer is 1e999999", "1e999999").score == 1.0
    assert grade("The answer is 1e999999", "1e999998").score == 0.0


def test_tolerance_options_in_the_spec() -> None:
    assert grade("3.2", 3.14, "numeric:abs_tol=0.1").score == 1.0
    assert grade("3.14159", 3.1416, "numeric:rel_tol=0").score == 0.0
    assert grade("105", 100, "numeric:rel_tol=0.1,abs_tol=0").score == 1.0
    assert grade("1e-12", 2e-12).score == 0.0  # no absolute slack by default


def test_bad_reference_is_an_error_not_a_zero() -> None:
    grader = get_grader("numeric")
    results = grader.grade_batch(["5", "5", "5", "5"], [5, "abc", True, 5])
    assert results[0] == GradeResult(score=1.0, extracted="5")
    assert results[1].score is None
    assert results[1].error == "reference is not a number: 'abc'"
    assert results[2].score is None and results[2].error is not None
    assert results[3] == GradeResult(score=1.0, extracted="5")


def test_a_crash_on_one_rollout_leaves_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    import curate.graders.simple as simple

    real = simple.extract_final_number

    def flaky(text: str) -> object:
        if "BOOM" in text:
            raise RuntimeError("extractor exploded\nwith a second line")
        return real(text)

    monkeypatch.setattr(simple, "extract_final_number", flaky)
    results = get_grader("numeric").grade_batch(["1", "BOOM", "3"], [1, 2, 3])
    assert [r.score for r in results] == [1.0, None, 1.0]
    assert results[1].error == "RuntimeError: extractor exploded with a second line"
    assert results[1].extracted is None
