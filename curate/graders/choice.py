r"""The `choice` grader: multiple-choice questions (MMLU, GPQA, AQuA, ARC...).

The reference is a letter, written ``B``, ``(B)``, ``B)``, ``B.`` or ``b`` (case does
not matter; a list means any of them). The completion's chosen letter is found, in
order of trust:

1. the marked final answer (``\boxed{B}``, "The answer is (B)", "Answer: B) 42",
   "**Answer:** B", ``#### B``) or "the correct option is C", whose first token must
   be a letter form;
2. a completion that *is* a letter form ("B", "**B**", "(B).") or starts with one on
   its first line ("B) because ...");
3. the last parenthesised capital letter, "(C)", anywhere in the text.

Nothing found scores 0.0 with extracted None. A bare capital "A" or "I" followed by a
lowercase word ("A prime number", "I think") is English, not a choice. A reference that
is not a letter is an error row: the data set, not the model, is wrong.
"""

from __future__ import annotations

import re

from curate.graders.base import (
    GradeResult,
    GraderOptions,
    GradingError,
    InProcessGrader,
    alternatives,
    as_score,
)
from curate.graders.simple import reference_text, takes_no_options
from curate.graders.text import extract_final_answer

# Optional lead-in words, then the letter: bracketed in any case, or bare and upper-case.
_LETTER = re.compile(
    r"""^[\s*_`"'$]*                       # markdown, quotes, math delimiters
        (?:\\text(?:bf)?\{\s*)?            # \text{B}
        (?:(?i:option|choice)\s+)?
        (?:\((?P<bracketed>[A-Za-z])\)     # (B) / (b)
          |\[(?P<squared>[A-Za-z])\]       # [B]
          |(?P<bare>[A-Z])(?![A-Za-z0-9])  # B, B), B., B:
        )
        (?P<after>.*)$""",
    re.VERBOSE | re.DOTALL,
)
_PARENTHESISED = re.compile(r"\(([A-Z])\)")
# "The correct option is C": "answer is" is already a marker; these phrasings are not.
_OPTION_IS = re.compile(r"\b(?:option|choice)\s+is\b\s*:?", re.IGNORECASE)
# "A" and "I" are also English words: "A prime number", "I think".
_ENGLISH_WORD = re.compile(r"^\s+[a-z]")
_REFERENCE = re.compile(r"^\s*(?:\(([A-Za-z])\)|([A-Za-z])[).:]?)\s*$")


def letter_of(text: str) -> str | None:
    """The choice letter `text` starts with, upper-cased, or None."""
    match = _LETTER.match(text)
    if match is None:
        return None
    letter = match["bracketed"] or match["squared"]
    if letter is None:
        letter = match["bare"]
        if letter in {"A", "I"} and _ENGLISH_WORD.match(match["after"]):
            return None
    return letter.upper()


def reference_letter(reference: object) -> str | None:
    """A reference written as a choice letter ("B", "(b)", "B.", "B)"), upper-cased."""
    if not isinstance(reference, str):
        return None
    match = _REFERENCE.match(reference)
    if match is None:
        return None
    return (match[1] or match[2]).upper()


def chosen_letter(answer_text: str) -> str | None:
    """The letter a completion chose (see the module docstring), or None."""
    marked = extract_final_answer(answer_text)
    if marked is not None:
        letter = letter_of(marked)
        if letter is not None:
            return letter
    phrases = list(_OPTION_IS.finditer(answer_text))
    if phrases:
        letter = letter_of(answer_text[phrases[-1].end() :])
        if letter is not None:
            return letter
    first_line = answer_text.strip().split("\n", 1)[0]
    letter = letter_of(first_line)
    if letter is not None:
        return letter
    bracketed = _PARENTHESISED.findall(answer_text)
    return bracketed[-1] if bracketed else None


class ChoiceGrader(InProcessGrader):
    """The chosen letter against the reference letter."""

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        targets = set()
        for option in alternatives(reference):
            letter = reference_letter(reference_text(option))
            if letter is None:
                shown = reference_text(option)[:60]
                raise GradingError(f"reference is not a choice letter: {shown!r}")
            targets.add(letter)
        chosen = chosen_letter(answer_text)
        if chosen is None:
            return GradeResult(score=0.0, extracted=None)
        return GradeResult(score=as_score(chosen in targets), extracted=chosen)


def choice_grader(spec: str, argument: str | None, options: GraderOptions) -> ChoiceGrader:
    """The registry's factory for ``choice``."""
    takes_no_options(spec, "choice", argument)
    return ChoiceGrader(spec)
