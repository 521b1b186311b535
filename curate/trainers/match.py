"""Match the prompts of a trainer's rollout files to the curated data set's sample ids.

Trainers rarely keep a sample id beside a rollout (verl's dump has none), so the prompt
text is the key. What a trainer writes is the prompt as the model saw it: the user's
text inside the chat template's wrapping (verl decodes the prompt tokens), or the
user's message itself (TRL). In order:

1. the whole text equals a sample's prompt text (whitespace runs collapsed);
2. the text, less a wrapping (prefix, suffix) learnt from the rows step 4 matched,
   equals a sample's prompt text: one chat template wraps every prompt the same way;
3. a chat template of a common family (`curate.trainers.templates`): with the
   generation prompt taken off the end, one piece at a time, the text ends with a
   sample's prompt text that starts after whitespace, a marker or a role word (found
   through an index of each text's last `ANCHOR` characters; the longest wins);
4. the text contains a sample's prompt text between word boundaries (found through an
   index of each text's first `ANCHOR` characters, shorter texts whole; the longest
   match wins).

A word boundary is any place where not both neighbours are letters, digits or `_`:
templates put markers such as `<|eot_id|>` right against the user's text.

A text two samples match equally well (the same prompt twice in the data set) is
ambiguous and left out; a text no sample matches is unmatched. Both are counted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from curate.trainers.templates import MAX_MARKERS, after_user_label, strip_generation_marker

ANCHOR = 24
# Rows step 3 matches before a wrapping is learnt from them.
LEARN_FROM = 64
_SPACE = re.compile(r"\s+")

AMBIGUOUS = object()


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass
class MatchResult:
    """sample id per distinct prompt text (absent: not matched), and counts by method."""

    ids: dict[str, str] = field(default_factory=dict)
    by_method: Counter[str] = field(default_factory=Counter)
    unmatched: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    wrapping: tuple[str, str] | None = None


class PromptMatcher:
    """Built once per data set: `sample_texts` maps sample id -> its prompt text."""

    def __init__(self, sample_texts: Mapping[str, str]) -> None:
        self.exact: dict[str, object] = {}
        for sample_id, text in sample_texts.items():
            key = normalise(text)
            if not key:
                continue
            self.exact[key] = AMBIGUOUS if key in self.exact else sample_id
        self.anchors: dict[str, list[str]] = {}
        self.tails: dict[str, list[str]] = {}
        for key in self.exact:
            if len(key) >= ANCHOR:
                self.anchors.setdefault(key[:ANCHOR], []).append(key)
                self.tails.setdefault(key[-ANCHOR:], []).append(key)
        # Texts shorter than an anchor are looked up whole, one length at a time.
        self.short_lengths = sorted({len(k) for k in self.exact if len(k) < ANCHOR})
        self.wrapping: tuple[str, str] | None = None

    def match(self, texts: Iterable[str]) -> MatchResult:
        result = MatchResult()
        pending: list[tuple[str, str]] = []
        for text in dict.fromkeys(texts):
            key = normalise(text)
            found = self.exact.get(key)
            if found is None:
                pending.append((text, key))
            else:
                self._record(result, text, found, "exact")
        # Learn the template's wrapping from the first rows containment finds.
        learnt: Counter[tuple[str, str]] = Counter()
        rest: list[tuple[str, str]] = []
        for text, key in pending:
            if self.wrapping is not None:
                inner = _unwrap(key, self.wrapping)
                if inner is not None and (found := self.exact.get(inner)) is not None:
                    self._record(result, text, found, "template")
                    continue
            templated = self._templated(key)
            if templated is not None:
                self._record(result, text, self.exact[templated], "chat-template")
                continue
            hit = self._contained(key)
            if hit is None:
                rest.append((text, key))
                continue
            inner_key, start = hit
            found = self.exact[inner_key]
            self._record(result, text, found, "contained")
            if found is not AMBIGUOUS and self.wrapping is None:
                learnt[(key[:start], key[start + len(inner_key) :])] += 1
                if sum(learnt.values()) >= LEARN_FROM:
                    self.wrapping = learnt.most_common(1)[0][0]
        if self.wrapping is None and learnt:
            self.wrapping = learnt.most_common(1)[0][0]
        for text, key in rest:
            inner = _unwrap(key, self.wrapping) if self.wrapping else None
            found = self.exact.get(inner) if inner is not None else None
            if found is None:
                result.unmatched.append(text)
            else:
                self._record(result, text, found, "template")
        result.wrapping = self.wrapping
        return result

    def _templated(self, key: str) -> str | None:
        """The sample text `key` ends with once generation-prompt pieces are taken off
        its end (none first, then one more at a time), starting on a boundary or right
        after a role word."""
        rest: str | None = key
        for _ in range(MAX_MARKERS + 1):
            if rest is None or not rest:
                return None
            found = self._suffix(rest)
            if found is not None:
                return found
            rest = strip_generation_marker(rest)
        return None

    def _suffix(self, text: str) -> str | None:
        """The longest sample text that ends `text` and starts on a boundary of it."""
        candidates = [c for c in self.tails.get(text[-ANCHOR:], ()) if text.endswith(c)]
        candidates += [text[-n:] for n in self.short_lengths if text[-n:] in self.exact]
        for candidate in sorted(candidates, key=len, reverse=True):
            start = len(text) - len(candidate)
            if start == 0 or _boundary(text, start) or after_user_label(text[:start]):
                return candidate
        return None

    def _contained(self, key: str) -> tuple[str, int] | None:
        """The longest sample text inside `key` on word boundaries, and where it starts."""
        best: tuple[str, int] | None = None
        for start in range(len(key)):
            if not _boundary(key, start):
                continue
            found = [
                c
                for c in self.anchors.get(key[start : start + ANCHOR], ())
                if key.startswith(c, start)
            ]
            found += [
                key[start : start + n]
                for n in self.short_lengths
                if key[start : start + n] in self.exact
            ]
            for candidate in found:
                if not _boundary(key, start + len(candidate)):
                    continue
                if best is None or len(candidate) > len(best[0]):
                    best = (candidate, start)
        return best

    @staticmethod
    def _record(result: MatchResult, text: str, found: object, method: str) -> None:
        if found is AMBIGUOUS:
            result.ambiguous.append(text)
        else:
            assert isinstance(found, str)
            result.ids[text] = found
            result.by_method[method] += 1


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _boundary(text: str, at: int) -> bool:
    """Whether position `at` of `text` is a word boundary (its ends are)."""
    if at <= 0 or at >= len(text):
        return True
    return not (_word(text[at - 1]) and _word(text[at]))


def _unwrap(key: str, wrapping: tuple[str, str]) -> str | None:
    prefix, suffix = wrapping
    if (
        len(key) < len(prefix) + len(suffix)
        or not key.startswith(prefix)
        or not key.endswith(suffix)
    ):
        return None
    return (
        key[len(prefix) : len(key) - len(suffix)].strip() if suffix else key[len(prefix) :].strip()
    )
