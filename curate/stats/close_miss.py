"""Close misses: a wrong answer that is nearly the reference.

A suspect label (`curate.stats.suspects`) is a sample whose rollouts agree on one
answer the grader rejects: a wrong reference, or a model that repeats its own mistake.
When the agreed answer is *close* to the reference, the second is the likelier story
(a weak model rounding, dropping a sign's neighbour digit, misspelling a name): the
report counts these before it asks a person to check labels.

Close, defined (both sides compared as text after stripping, case folding and
collapsing white space; equal answers are never close misses):

- numbers (both sides a plain number: digits, an optional sign, comma groups and a
  fraction; a leading currency sign or a trailing % is ignored): within
  RELATIVE_DISTANCE of each other, relative to the larger magnitude (|a - r| <=
  0.01 * max(|a|, |r|)). 45 against 46 is not close (2.2%); 3.14 against 3.1416 is.
- text: at most MAX_EDITS edits apart (Levenshtein: insertions, deletions,
  substitutions) and at most a third of the longer side's length, so that a one-letter
  choice ("B" against "C") or a two-character answer is never close by spelling alone.
"""

from __future__ import annotations

import re
from typing import Final

RELATIVE_DISTANCE: Final = 0.01
MAX_EDITS: Final = 2

_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$|^[+-]?\.\d+$")
_CURRENCY = re.compile(r"^[$€£¥₹]\s?")


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def _number(text: str) -> float | None:
    body = _CURRENCY.sub("", text).removesuffix("%").strip()
    if not _NUMBER.match(body):
        return None
    return float(body.replace(",", ""))


def edit_distance(a: str, b: str, cap: int = MAX_EDITS) -> int:
    """Levenshtein distance of `a` and `b`, or `cap` + 1 once it exceeds `cap` (a band
    of width 2*cap+1 around the diagonal is all that can stay within it)."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [cap + 1] * len(b)
        lo, hi = max(1, i - cap), min(len(b), i + cap)
        for j in range(lo, hi + 1):
            cost = 0 if ca == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        if min(current) > cap:
            return cap + 1
        previous = current
    return min(previous[len(b)], cap + 1)


def close_miss(answer: str | None, reference: str | None) -> bool:
    """Whether `answer` is a close miss of `reference` (module docstring)."""
    if answer is None or reference is None:
        return False
    a, r = _folded(answer), _folded(reference)
    if not a or not r or a == r:
        return False
    x, y = _number(a), _number(r)
    if x is not None and y is not None:
        return x != y and abs(x - y) <= RELATIVE_DISTANCE * max(abs(x), abs(y))
    if x is not None or y is not None:
        return False  # a number against text: not a near spelling of it
    allowed = min(MAX_EDITS, max(len(a), len(r)) // 3)
    return allowed >= 1 and edit_distance(a, r, allowed) <= allowed
