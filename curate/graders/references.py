r"""References understood before anything is generated: extract the answer from the
layouts real data sets use, then choose the grader that fits what was extracted.

Extractors (`EXTRACT_MODES`; each reads one reference, or says it does not apply):

* ``gsm8k``: the last ``#### X`` line of a worked rationale (GSM8K, and sets built like
  it), thousands separators dropped: ``#### 1,234`` -> ``1234``.
* ``boxed``: the last top-level ``\boxed{...}`` / ``\fbox{...}`` of a reference
  solution (MATH, NuminaMath), braces matched, nested boxes unwrapped.
* ``answer-is``: the text after the last "The answer is" / "Answer:" of a final line
  (chain-of-thought sets, AQuA-style "The answer is (B).").
* ``last-number``: the last number in the reference (only when asked for: on prose it
  is a guess).
* ``none``: the reference as given.
* ``auto``: looks at every reference and picks, per data set, the extractor that
  explains them: the first of gsm8k, boxed, answer-is that reads at least half of the
  references (the rest are kept as given, and counted), else none.

Whatever the extractor, a result written as a multiple-choice letter (``(B)``, ``B)``,
``B.``, ``b``) becomes the bare capital letter, and surrounding whitespace is dropped.
Non-string references (numbers, lists of alternatives) pass through untouched.

`choose_grader` then looks at the extracted references: numbers -> ``numeric``,
multiple-choice letters -> ``choice``, numbers mixed with LaTeX or expressions ->
``math``, anything else -> ``exact``; a kind is chosen when it fits at least
`min_fraction` (99%) of the references, so one odd reference does not send a whole
data set to ``exact``; the odd ones are what the reference check reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from curate.errors import UsageError
from curate.graders.choice import reference_letter
from curate.graders.numeric import find_numbers, reference_number
from curate.graders.text import last_boxed

ExtractMode = Literal["auto", "gsm8k", "boxed", "answer-is", "last-number", "none"]
EXTRACT_MODES: tuple[str, ...] = get_args(ExtractMode)

_GSM8K = re.compile(r"^[ \t]*####[ \t]*(.+?)[ \t]*$", re.MULTILINE)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_ANSWER_IS = re.compile(
    r"\b(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*:?\s*(?P<answer>[^\n]+?)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
# An answer line ends a sentence: "The answer is 12." -> "12", "... (B)." -> "(B)".
_TRAILING_PERIOD = re.compile(r"(?<!\.)\.$")


def _gsm8k(text: str) -> str | None:
    found = _GSM8K.findall(text)
    if not found:
        return None
    return _THOUSANDS.sub("", found[-1]).strip() or None


def _boxed(text: str) -> str | None:
    return last_boxed(text) or None


def _answer_is(text: str) -> str | None:
    found = list(_ANSWER_IS.finditer(text))
    if not found:
        return None
    answer = found[-1]["answer"].strip().strip("*").strip()
    answer = _TRAILING_PERIOD.sub("", answer).strip()
    if answer.startswith("$") and answer.endswith("$") and len(answer) > 2:
        answer = answer.strip("$").strip()  # "$\frac{1}{2}$": the math delimiters
    return answer or None


def _last_number(text: str) -> str | None:
    found = find_numbers(text)
    if not found:
        return None
    return _THOUSANDS.sub("", found[-1].text)


_EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "gsm8k": _gsm8k,
    "boxed": _boxed,
    "answer-is": _answer_is,
    "last-number": _last_number,
}
# What `auto` tries, most specific layout first.
_AUTO_ORDER = ("gsm8k", "boxed", "answer-is")
# The share of references an extractor must read for `auto` to choose it.
AUTO_MIN_SHARE = 0.5

_DESCRIPTIONS = {
    "gsm8k": "GSM8K '#### N' answers",
    "boxed": r"the last \boxed{...} of each reference solution",
    "answer-is": "the final 'The answer is ...' line",
    "last-number": "the last number of each reference",
    "none": "references as given",
}


def _tidy(value: str) -> str:
    value = value.strip()
    letter = reference_letter(value)
    return letter if letter is not None else value


def extract_reference(reference: object, mode: str) -> object | None:
    """One reference's answer under one extractor (not ``auto``): None when the
    extractor does not apply; non-strings are returned as they are."""
    if mode not in EXTRACT_MODES or mode == "auto":
        raise UsageError(f"reference extraction {mode!r}: expected one of {EXTRACT_MODES[1:]}")
    if not isinstance(reference, str):
        return reference
    if mode == "none":
        return _tidy(reference)
    found = _EXTRACTORS[mode](reference)
    return _tidy(found) if found is not None else None


@dataclass(frozen=True, slots=True)
class ReferenceExtraction:
    """What extraction did to a data set's references."""

    mode: str  # the extractor applied ("gsm8k", "boxed", "answer-is", "last-number", "none")
    requested: str  # what was asked for ("auto" or the mode itself)
    references: dict[str, object]  # sample id -> extracted reference (as given if unread)
    applied: int  # string references the extractor read
    total: int  # all references
    unread: list[str] = field(default_factory=list)  # ids of strings it could not read

    @property
    def summary(self) -> str:
        """One sentence for the terminal and the manifest."""
        how = "chosen automatically" if self.requested == "auto" else "as asked"
        if self.mode == "none":
            return f"references used as given ({self.total} references; {how})"
        text = (
            f"references: {_DESCRIPTIONS[self.mode]} ({how}), read from "
            f"{self.applied} of {self.total} references"
        )
        if self.unread:
            text += f"; {len(self.unread)} kept as given"
        return text


def extract_mode_of_manifest(manifest: Mapping[str, object]) -> str:
    """The extractor a run's manifest records its references were read with ("none" for
    a run made before extraction existed, or an extractor this version does not know)."""
    record = manifest.get("reference_extract")
    mode = record.get("mode") if isinstance(record, dict) else record
    return mode if isinstance(mode, str) and mode in EXTRACT_MODES else "none"


def extract_references(references: Mapping[str, object], mode: str = "auto") -> ReferenceExtraction:
    """Extract every reference's answer; ``auto`` picks the extractor for the data set.

    References an extractor cannot read are kept as they were (and listed in `unread`),
    so the grader and the reference check still see them.
    """
    if mode not in EXTRACT_MODES:
        raise UsageError(
            f"unknown reference extraction {mode!r}; expected one of: {', '.join(EXTRACT_MODES)}"
        )
    texts = {sid: ref for sid, ref in references.items() if isinstance(ref, str)}
    chosen = mode
    if mode == "auto":
        chosen = "none"
        for candidate in _AUTO_ORDER:
            reads = sum(_EXTRACTORS[candidate](text) is not None for text in texts.values())
            if texts and reads >= AUTO_MIN_SHARE * len(texts):
                chosen = candidate
                break
    extracted: dict[str, object] = {}
    unread: list[str] = []
    for sid, reference in references.items():
        value = extract_reference(reference, chosen)
        if value is None and isinstance(reference, str):
            unread.append(sid)
            value = _tidy(reference)
        extracted[sid] = value
    applied = len(texts) - len(unread) if chosen != "none" else 0
    return ReferenceExtraction(
        mode=chosen,
        requested=mode,
        references=extracted,
        applied=applied,
        total=len(references),
        unread=unread,
    )


# -- choosing the grader -------------------------------------------------------------------

# LaTeX commands, powers/subscripts, or an expression of numbers, variables and operators.
_LATEX = re.compile(r"\\[A-Za-z]+|\^|_\{|\\[{}]|\\[,!;:]")
_EXPRESSION = re.compile(
    r"^[\s\dA-Za-z.+\-*/=<>()\[\],{}|!√π∞]+$"  # nothing but math characters
)
_OPERATOR_OR_VARIABLE = re.compile(r"[+\-*/=<>()\[\]√π∞]|(?<![A-Za-z])[a-z](?![A-Za-z])")
_WORD = re.compile(r"[A-Za-z]{3,}")


def is_number(reference: object) -> bool:
    return reference_number(reference, strict=True) is not None


def is_math(reference: object) -> bool:
    """LaTeX (``\\frac{1}{2}``, ``x^2``) or a short expression (``2x+1``, ``(1, -2)``)."""
    if not isinstance(reference, str):
        return False
    text = reference.strip()
    if not text:
        return False
    if _LATEX.search(text):
        return True
    # "2x+1", "(3, 4)", "x = 5", "[0, 1)"; not prose ("forty two", "Paris").
    return (
        len(text) <= 80
        and _EXPRESSION.match(text) is not None
        and _OPERATOR_OR_VARIABLE.search(text) is not None
        and _WORD.search(text) is None
    )


def is_letter(reference: object) -> bool:
    return isinstance(reference, str) and reference_letter(reference) is not None


@dataclass(frozen=True, slots=True)
class GraderChoice:
    """The grader spec picked for a data set and the sentence saying why."""

    spec: str
    reason: str


def choose_grader(references: Mapping[str, object], *, min_fraction: float = 0.99) -> GraderChoice:
    """The grader for these (extracted) references, and why (see the module docstring).

    Missing references (None, empty strings) are left out of the count: they are data
    errors that the reference check reports, whatever the grader.
    """
    present = [
        ref
        for ref in references.values()
        if ref is not None and not (isinstance(ref, str) and not ref.strip())
    ]
    if not present:
        return GraderChoice("exact", "exact: no references to look at")
    total = len(present)
    need = min_fraction * total

    def count(test: Callable[[object], bool]) -> int:
        return sum(1 for ref in present for option in _options(ref) if test(option))

    numbers = count(is_number)
    if numbers >= need:
        return GraderChoice("numeric", f"numeric: {_share(numbers, total)} are numbers")
    letters = count(is_letter)
    if letters >= need:
        return GraderChoice(
            "choice", f"choice: {_share(letters, total)} are multiple-choice letters"
        )
    mathy = count(lambda ref: is_number(ref) or is_math(ref))
    if mathy >= need:
        return GraderChoice(
            "math", f"math: {_share(mathy, total)} are numbers, LaTeX or expressions"
        )
    return GraderChoice(
        "exact",
        f"exact: only {_share(max(numbers, letters, mathy), total)} look like numbers, "
        "letters or math",
    )


def _options(reference: object) -> list[object]:
    # A list of alternatives counts as one reference: the first stands for it.
    if isinstance(reference, list | tuple):
        return list(reference[:1])
    return [reference]


def _share(count: int, total: int) -> str:
    return f"{count} of {total} references"
