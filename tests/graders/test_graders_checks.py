"""The reference self-check: every reference graded against itself as a correct answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from curate.graders import Grader, get_grader
from curate.graders.checks import (
    BadReference,
    ReferenceCheck,
    check_references,
    correct_completions,
)
from curate.graders.references import choose_grader, extract_references

GSM8K_LIKE = {
    "1": "3 + 4 = 7\n#### 7",
    "2": "10 * 2 = 20\n#### 20",
    "3": "The answer is in the table",  # no '#### N': a broken row
    "4": "1,000 + 234\n#### 1,234",
}


@pytest.fixture
def numeric() -> Iterator[Grader]:
    grader = get_grader("numeric")
    yield grader
    grader.close()


def test_extracted_gsm8k_references_pass_the_numeric_grader(numeric: Grader) -> None:
    extraction = extract_references(GSM8K_LIKE)
    check = check_references(numeric, extraction.references)
    assert (check.total, check.unparsable, check.rejected) == (4, 1, 0)
    assert check.examples == (
        BadReference(
            "3",
            "'The answer is in the table'",
            "reference is not a number: 'The answer is in the table'",
        ),
    )
    assert check.bad_fraction == 0.25
    assert check.exceeds(0.01) and not check.exceeds(0.25)


def test_the_issue_11_failure_is_caught_before_generation(numeric: Grader) -> None:
    # Unextracted rationales: the numeric grader cannot read a single reference.
    check = check_references(numeric, {"1": GSM8K_LIKE["1"], "2": GSM8K_LIKE["2"]})
    assert check.unparsable == 2 and check.bad_fraction == 1.0
    # The exact grader would accept a rationale written back verbatim, so the check
    # looks at the reference itself: a model's "7" never equals a worked solution.
    exact = get_grader("exact")
    check = check_references(exact, {"1": GSM8K_LIKE["1"], "2": "two\nlines", "3": "7"})
    assert (check.unparsable, check.rejected) == (0, 2)
    assert check.summary == (
        "grader 'exact' cannot use 2 of 3 references (66.7%): 0 unparsable, "
        # The reference as written, on one line (no repr escapes).
        "2 not accepted as a correct answer; e.g. sample 1 '3 + 4 = 7 #### 7': looks "
        "like a worked solution, not an answer (its '####' line says '7'); extract the "
        "answers first"
    )
    assert check.examples[1].problem == (
        "looks like a worked solution (several lines), not an answer"
    )


def test_every_builtin_accepts_its_own_references() -> None:
    sets: dict[str, dict[str, object]] = {
        "numeric": {"1": "72", "2": 1234, "3": "-5", "4": "3/4", "5": "12%"},
        "exact": {"1": "Paris", "2": "New York", "3": "42"},
        "choice": {"1": "B", "2": "(c)", "3": "D."},
        "regex:(\\d+)": {"1": "7", "2": "12"},
    }
    for spec, references in sets.items():
        grader = get_grader(spec)
        check = check_references(grader, references)
        assert check.bad == 0, (spec, check.summary)
        assert check.summary == f"grader {spec!r} accepts all {len(references)} references"


def test_math_grader_accepts_extracted_math_references() -> None:
    pytest.importorskip("math_verify")
    extraction = extract_references(
        {
            "1": r"So $\boxed{\frac{15}{2}}$.",
            "2": r"$\boxed{\left( 3, \frac{\pi}{2} \right)}$",
            "3": r"$\boxed{3\sqrt{2}}$",
            "4": r"$\boxed{12}$",
            "5": r"$\boxed{x^2+2x+1}$",
        }
    )
    assert choose_grader(extraction.references).spec == "math"
    grader = get_grader("math")
    try:
        check = check_references(grader, extraction.references)
    finally:
        grader.close()
    assert check.bad == 0, check.summary


def test_missing_references_and_empty_alternatives(numeric: Grader) -> None:
    check = check_references(numeric, {"a": None, "b": [], "c": "5"}, max_examples=1)
    assert (check.unparsable, check.rejected) == (2, 0)
    assert len(check.examples) == 1  # only the first few are kept
    assert check.examples[0] == BadReference("a", "None", "reference is not a number: None")


def test_partial_credit_is_not_acceptance(tmp_path: Path) -> None:
    path = tmp_path / "half.py"
    path.write_text("def half(completion, reference):\n    return 0.5\n")
    grader = get_grader(f"python:{path}:half", timeout_s=30)
    try:
        check = check_references(grader, {"1": "x"})
    finally:
        grader.close()
    assert check.rejected == 1
    assert check.examples[0].problem.startswith("best score 0.5, for ")


def test_forms_tried() -> None:
    assert correct_completions("68") == [
        "The answer is \\boxed{68}.",
        "68",
        "#### 68",
        "The answer is 68.",
    ]
    assert correct_completions(r"\boxed{5}")[0] == r"\boxed{5}"
    assert correct_completions(7.0)[1] == "7"
    assert correct_completions(["a", "b"])[1] == "a"
    assert correct_completions([]) == []


def test_empty_check() -> None:
    check = ReferenceCheck("exact", 0, 0, 0, ())
    assert check.bad_fraction == 0.0 and not check.exceeds()


def test_issue_11_sample_file_end_to_end(numeric: Grader) -> None:
    """The GSM8K-layout sample: extracted, graded numerically, every reference usable."""
    import json

    path = Path(__file__).resolve().parents[2] / "sample_data" / "gsm8k_layout.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    raw = {f"row-{i}": row["answer"] for i, row in enumerate(rows)}  # GSM8K has no ids
    extraction = extract_references(raw)
    assert extraction.mode == "gsm8k" and extraction.applied == len(rows) == 40
    assert "1331" in extraction.references.values()  # "#### 1,331": thousands separators
    choice = choose_grader(extraction.references)
    assert choice.spec == "numeric"
    assert check_references(numeric, extraction.references).bad == 0
    assert (
        check_references(numeric, raw).bad_fraction == 1.0
    )  # the raw worked solutions, unextracted
    # The correct answer to each question, as a model writes it, scores 1.
    completions = [f"So the answer is {ref}." for ref in extraction.references.values()]
    results = numeric.grade_batch(completions, list(extraction.references.values()))
    assert {result.score for result in results} == {1.0}


def test_a_bad_reference_is_shown_as_written() -> None:
    grader = get_grader("choice")
    try:
        check = check_references(grader, {"1": r"\$5"})
    finally:
        grader.close()
    assert check.examples[0].reference == r"'\$5'"  # not '\\$5'
