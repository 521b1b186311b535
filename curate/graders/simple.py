"""The in-process built-in graders: `exact`, `numeric` and `regex:PATTERN`.

All three strip reasoning first (`curate.graders.text.strip_think`) and accept a
list/tuple reference as "any of these answers is correct".

* exact: the completion's marked final answer (``\\boxed{}``, "answer is", "Answer:",
  ``####``), or the whole completion when there is no marker, must equal the reference
  after `normalise_answer`. Using the whole completion as the fallback keeps `exact`
  strict: a chatty completion without a marker is wrong rather than guessed at. An empty
  answer scores 0.0 with extracted None.
* numeric: see `curate.graders.numeric`. A reference that is not a number is an error
  row ("reference is not a number"), not a wrong answer: it is a data problem.
* regex:PATTERN: the last match of PATTERN (``re.search`` semantics, anywhere in the
  text; add inline flags such as ``(?i)`` or ``(?s)`` to the pattern) gives the answer:
  group 1 if the pattern has groups, else the whole match. It is correct when it equals
  the reference after `normalise_answer`, or when both are numbers that match with the
  default numeric tolerance. The pattern runs in-process with no timeout, so a
  catastrophically backtracking pattern can stall the run.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from curate.errors import UsageError
from curate.graders.base import (
    GradeResult,
    GraderOptions,
    GradingError,
    InProcessGrader,
    alternatives,
    as_score,
)
from curate.graders.numeric import (
    Number,
    Tolerance,
    extract_final_number,
    numbers_match,
    parse_number,
    reference_number,
)
from curate.graders.text import extract_final_answer, normalise_answer


def _short_repr(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:  # huge ints refuse repr(); any repr may raise
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reference_text(reference: object) -> str:
    """A reference as text for string comparison (integral floats lose their ".0")."""
    if reference is None:
        raise GradingError("reference is missing (None)")
    if isinstance(reference, str):
        return reference
    if isinstance(reference, float) and math.isfinite(reference) and reference.is_integer():
        return str(int(reference))
    if (
        isinstance(reference, Decimal)
        and reference.is_finite()
        and reference == reference.to_integral_value()
    ):
        return str(reference.to_integral_value())
    return str(reference)


class ExactGrader(InProcessGrader):
    """Normalised string equality on the final answer."""

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        marked = extract_final_answer(answer_text)
        extracted = normalise_answer(marked if marked is not None else answer_text)
        if not extracted:
            return GradeResult(score=0.0, extracted=None)
        ok = any(
            extracted == normalise_answer(reference_text(option))
            for option in alternatives(reference)
        )
        return GradeResult(score=as_score(ok), extracted=extracted)


class NumericGrader(InProcessGrader):
    """The final number in the completion against a numeric reference, with tolerance."""

    def __init__(self, name: str, tolerance: Tolerance | None = None) -> None:
        super().__init__(name)
        self.tolerance = tolerance if tolerance is not None else Tolerance()

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        targets = [_reference_number(option) for option in alternatives(reference)]
        predicted = extract_final_number(answer_text)
        if predicted is None:
            return GradeResult(score=0.0, extracted=None)
        ok = any(numbers_match(predicted, target, self.tolerance) for target in targets)
        return GradeResult(score=as_score(ok), extracted=predicted.text)


def _reference_number(reference: object) -> Number:
    number = reference_number(reference)
    if number is None:
        raise GradingError(f"reference is not a number: {_short_repr(reference)}")
    return number


def answers_equal(answer: str, reference: object, tolerance: Tolerance | None = None) -> bool:
    """Normalised string equality, or numeric equality when both sides are numbers."""
    if normalise_answer(answer) == normalise_answer(reference_text(reference)):
        return True
    predicted = parse_number(answer)
    target = reference_number(reference, strict=True)
    if predicted is None or target is None:
        return False
    return numbers_match(predicted, target, tolerance if tolerance is not None else Tolerance())


class RegexGrader(InProcessGrader):
    """The last match of a user pattern, compared like `exact` (or numerically)."""

    def __init__(self, name: str, pattern: re.Pattern[str]) -> None:
        super().__init__(name)
        self.pattern = pattern

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        last: re.Match[str] | None = None
        for last in self.pattern.finditer(answer_text):  # noqa: B007 - we want the last one
            pass
        if last is None:
            return GradeResult(score=0.0, extracted=None)
        extracted = last.group(1) if self.pattern.groups else last.group(0)
        if extracted is None:  # group 1 is optional and did not take part in the match
            return GradeResult(score=0.0, extracted=None)
        ok = any(answers_equal(extracted, option) for option in alternatives(reference))
        return GradeResult(score=as_score(ok), extracted=extracted)


# -- factories (the grader registry's entries; see `curate.graders.registry`) ----------


def takes_no_options(spec: str, kind: str, argument: str | None) -> None:
    if argument is not None:
        raise UsageError(f"grader {spec!r}: {kind!r} takes no options")


def exact_grader(spec: str, argument: str | None, options: GraderOptions) -> ExactGrader:
    takes_no_options(spec, "exact", argument)
    return ExactGrader(spec)


def numeric_grader(spec: str, argument: str | None, options: GraderOptions) -> NumericGrader:
    if argument is not None and not argument.strip():
        raise UsageError(f"grader {spec!r}: nothing after 'numeric:'")
    tolerance = parse_tolerance(spec, argument) if argument is not None else Tolerance()
    return NumericGrader(spec, tolerance)


def parse_tolerance(spec: str, options: str) -> Tolerance:
    """``rel_tol=X,abs_tol=Y`` (either or both) as a `Tolerance`, or `UsageError`."""
    values: dict[str, float] = {}
    for item in options.split(","):
        key, sep, raw = (part.strip() for part in item.partition("="))
        if not sep or key not in {"rel_tol", "abs_tol"}:
            raise UsageError(
                f"grader {spec!r}: expected numeric:rel_tol=X and/or abs_tol=Y, "
                f"got {item.strip()!r}"
            )
        if key in values:
            raise UsageError(f"grader {spec!r}: {key} given twice")
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"grader {spec!r}: {key} must be a number, got {raw!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise UsageError(f"grader {spec!r}: {key} must be a finite number >= 0, got {raw!r}")
        values[key] = value
    return Tolerance(**values)


def regex_grader(spec: str, argument: str | None, options: GraderOptions) -> RegexGrader:
    if not argument:
        raise UsageError(f"grader {spec!r}: expected regex:PATTERN with a non-empty pattern")
    try:
        pattern = re.compile(argument)
    except re.error as exc:
        raise UsageError(f"grader {spec!r}: invalid regular expression: {exc}") from exc
    return RegexGrader(spec, pattern)
