r"""Pure number helpers for the `numeric` grader: find numbers in free text, parse a
reference, and compare with a tolerance.

Decisions a user should know:

* Which number. The first number inside the marked final answer (``\boxed{}``, "answer
  is ...", "Answer: ...", ``#### ...``; see `curate.graders.text`) wins; without a
  marker, the last number in the completion.
* Accepted forms: ``1,234.5`` (a comma is always a thousands separator, never a decimal
  comma), ``-5`` / ``−5``, accounting negatives ``(12)`` (the parentheses must hold only
  the number, so ``f(3)`` is 3), currency ``$ € £ ¥ ₹``, ``3/4`` and ``\frac{3}{4}``,
  ``1e-5`` / ``1.2 \times 10^{5}``, percentages ``12%`` / ``12 percent``, scale words
  ``thousand / million / billion / trillion`` and attached ``k K M MM mn B bn tn``.
  Other trailing units/words are ignored: "3.2 kg" is 3.2. A number glued to a letter
  before it ("x2", "CO2") or following "." or "/" is not a number.
* Percentages, FinQA-style: a number written with ``%`` may stand for itself or for its
  hundredth, on either side. A reference of "12%" accepts 12, 12% and 0.12; a reference
  of 0.12 accepts "12%"; a plain 12 and a plain 0.12 do not match each other.
* Scale words are optional: "5 million" may stand for 5000000 or for 5 (tables "in
  millions"), so it matches a reference of either.
* Tolerance: ``|a - b| <= max(rel_tol * max(|a|, |b|), abs_tol)`` with defaults
  rel_tol=1e-4, abs_tol=0 (so tiny references such as 1e-12 are not matched by
  anything small). Arithmetic is exact decimal arithmetic, so huge integers that differ
  in the last digit do not compare equal the way floats would.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation, localcontext
from fractions import Fraction

from curate.graders.text import extract_final_answer

# Plenty of digits for tolerance checks and fractions; the huge exponent range means no
# overflow. Shifts by powers of ten use _EXACT so that long integers keep every digit.
_CONTEXT = Context(prec=60, Emax=MAX_EMAX, Emin=MIN_EMIN)
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How close two numbers must be to count as equal."""

    rel_tol: float = 1e-4
    abs_tol: float = 0.0

    def __post_init__(self) -> None:
        for field_name in ("rel_tol", "abs_tol"):
            value = getattr(self, field_name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{field_name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Number:
    """A number as written: its signed value, whether it had a %, and its scale word."""

    value: Decimal
    text: str
    percent: bool = False
    scale: int = 0  # power of ten named by a scale word ("million" -> 6)

    def readings(self) -> frozenset[Decimal]:
        """Every value this number may stand for (see the module docstring)."""
        values = {self.value}
        if self.scale:
            values.add(self.value.scaleb(self.scale, _EXACT))
        if self.percent:
            values |= {value.scaleb(-2, _EXACT) for value in values}
        return frozenset(values)


_SCALES: dict[str, int] = {
    "thousand": 3,
    "million": 6,
    "billion": 9,
    "trillion": 12,
    "k": 3,
    "K": 3,
    "M": 6,
    "MM": 6,
    "mn": 6,
    "B": 9,
    "bn": 9,
    "tn": 12,
}

_NUMBER = re.compile(
    r"""
    (?<![\w./])                                   # not glued to a word, "." or "/"
    (?P<open>\(\s*)?                              # accounting negative: (12)
    (?P<sign>[-+])?
    (?:(?P<currency>[$€£¥₹])\s*)?                # "\s*" only after a symbol: see below
    (?P<sign2>[-+])?                              # $-5
    (?P<mantissa>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
    (?:\s*/\s*(?P<denominator>\d+(?:\.\d+)?))?
    (?:[eE](?P<exponent>[-+]?\d{1,6})(?!\d))?
    (?:\s*(?:\\times|\\cdot|×|\*|·)\s*10\s*\^\s*
        (?:\{\s*(?P<exponent10a>[-+]?\d{1,6})\s*\}|(?P<exponent10b>[-+]?\d{1,6})(?!\d)))?
    (?P<percent>\s*(?:%|(?i:percent|per\s+cent)\b))?
    (?:\s*(?P<word_scale>(?i:thousand|million|billion|trillion))s?\b
       |(?P<letter_scale>k|K|MM|M|mn|B|bn|tn)\b)?
    (?(open)(?P<close>\s*\))?)
    """,
    re.VERBOSE,
)
# Every "\s*" in _NUMBER sits after a literal that must match first (or after the mantissa),
# so a long run of spaces costs linear time; an optional "\s*" that could start a match
# anywhere would make such runs quadratic.

_LATEX_TEXT = re.compile(r"\\(?:text|textrm|mathrm|mbox|textbf)\s*\{([^{}]*)\}")
_LATEX_FRAC = re.compile(
    r"\\[dt]?frac\s*\{\s*([-+]?\d+(?:\.\d+)?)\s*\}\s*\{\s*(\d+(?:\.\d+)?)\s*\}"
)
_LATEX_FRAC_SHORT = re.compile(r"\\[dt]?frac(\d)(\d)")
_LATEX_THIN_SPACE_THOUSANDS = re.compile(r"(?<=\d)\\,(?=\d{3}(?!\d))")


def prepare(text: str) -> str:
    """Rewrite the LaTeX/Unicode spellings of numbers into the plain ones `_NUMBER` reads."""
    text = text.replace("\u2212", "-").replace("\u2044", "/")  # Unicode minus, fraction slash
    text = text.replace("{,}", ",").replace("\\%", "%").replace("\\$", "$").replace("\\!", "")
    text = _LATEX_THIN_SPACE_THOUSANDS.sub(",", text)
    text = _LATEX_TEXT.sub(r" \1", text)
    text = _LATEX_FRAC.sub(r"\1/\2", text)
    return _LATEX_FRAC_SHORT.sub(r"\1/\2", text)


def _power_of_ten(match: re.Match[str]) -> int:
    exponent = match["exponent"] or match["exponent10a"] or match["exponent10b"]
    return int(exponent) if exponent else 0


def _to_number(match: re.Match[str]) -> Number | None:
    if match["sign"] and match["sign2"]:
        return None  # "-$-5", "--5": not a way to write a number
    try:
        with localcontext(_CONTEXT):
            value = Decimal(match["mantissa"].replace(",", ""))
            if match["denominator"] is not None:
                denominator = Decimal(match["denominator"])
                if denominator == 0:
                    return None
                value = value / denominator
            value = value.scaleb(_power_of_ten(match), _EXACT)
            if match["exponent"] and (match["exponent10a"] or match["exponent10b"]):
                return None  # "1e5 × 10^3" is not a way anyone writes a number
    except (InvalidOperation, ValueError):
        return None
    negative = (match["sign"] or match["sign2"]) == "-"
    negative = negative or (match["open"] is not None and match["close"] is not None)
    scale_word = match["word_scale"] or match["letter_scale"]
    text = match.group(0).strip()
    if match["open"] is not None and match["close"] is None:
        text = text[1:].strip()  # an opening bracket that is not an accounting negative
    return Number(
        value=value.copy_negate() if negative else value,  # unary minus would round
        text=text,
        percent=match["percent"] is not None,
        scale=_SCALES[scale_word.lower() if match["word_scale"] else scale_word]
        if scale_word
        else 0,
    )


def find_numbers(text: str) -> list[Number]:
    """Every number in `text`, left to right."""
    found: list[Number] = []
    for match in _NUMBER.finditer(prepare(text)):
        number = _to_number(match)
        if number is not None:
            found.append(number)
    return found


def parse_number(text: str) -> Number | None:
    """`text` as one number (whole string, e.g. "$1.2 million", "(45)", "12%"), else None."""
    candidate = prepare(text).strip().rstrip(".").strip()
    if len(candidate) > 2 and candidate.startswith("$") and candidate.endswith("$"):
        candidate = candidate[1:-1].strip()  # LaTeX math delimiters, not currency
    match = _NUMBER.fullmatch(candidate)
    return _to_number(match) if match is not None else None


def extract_final_number(completion: str) -> Number | None:
    """The completion's answer number (see module docstring), or None."""
    prepared = prepare(completion)
    answer = extract_final_answer(prepared)
    if answer is not None:
        in_answer = find_numbers(answer)
        if in_answer:
            return in_answer[0]
    everywhere = find_numbers(prepared)
    return everywhere[-1] if everywhere else None


def reference_number(reference: object, *, strict: bool = False) -> Number | None:
    """A reference as a number, or None if it is not one.

    Numbers (not bools) are taken as they are; a string must parse as one number, or,
    unless `strict`, contain exactly one number ("3.2 kg").
    """
    if isinstance(reference, bool):
        return None
    if isinstance(reference, str):
        parsed = parse_number(reference)
        if parsed is not None or strict:
            return parsed
        found = find_numbers(reference)
        return found[0] if len(found) == 1 else None
    try:
        with localcontext(_CONTEXT):
            if isinstance(reference, numbers.Integral):
                value = Decimal(int(reference))
            elif isinstance(reference, Fraction):
                value = Decimal(reference.numerator) / Decimal(reference.denominator)
            elif isinstance(reference, Decimal):
                value = reference
            elif isinstance(reference, numbers.Real):
                # repr() gives the shortest decimal that round-trips: 0.1 -> "0.1".
                value = Decimal(repr(float(reference)))
            else:
                return None
    except (InvalidOperation, ValueError, OverflowError):
        return None
    if not value.is_finite():
        return None
    return Number(value=value, text="")


def is_close(a: Decimal, b: Decimal, tolerance: Tolerance) -> bool:
    with localcontext(_CONTEXT):
        if a == b:
            return True
        allowed = max(
            Decimal(repr(tolerance.rel_tol)) * max(abs(a), abs(b)),
            Decimal(repr(tolerance.abs_tol)),
        )
        return abs(a - b) <= allowed


def numbers_match(predicted: Number, reference: Number, tolerance: Tolerance) -> bool:
    """True when any reading of `predicted` is close to any reading of `reference`."""
    return any(
        is_close(a, b, tolerance) for a in predicted.readings() for b in reference.readings()
    )
