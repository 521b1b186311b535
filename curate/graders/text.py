r"""Pure text helpers shared by the graders: reasoning removal, final-answer extraction,
and answer normalisation.

Decisions:

* Reasoning. A leading ``<think>...</think>`` block (after optional whitespace) is removed
  before any extraction. A completion that opens ``<think>`` and never closes it never
  gave an answer: `strip_think` returns None and the graders score it 0.0 (wrong, not an
  error). A completion with a ``</think>`` but no opening tag is treated as reasoning up to
  the first ``</think>``: chat templates such as Qwen3 and DeepSeek-R1 put the opening tag
  in the prompt, so the completion starts inside the thinking block.
* Final answer. `extract_final_answer` prefers, in order: the content of the last
  top-level ``\boxed{...}`` / ``\fbox{...}`` (braces matched, ``\{`` escapes honoured,
  nested boxes unwrapped, unbalanced boxes from truncated output ignored); else the
  text after the last "answer is" / "answer:" / "answer =" (markdown bold allowed),
  up to the end of that sentence or line; else a GSM8K-style ``#### X`` line. It returns
  None when there is no marker; each grader picks its own fallback.
* Normalisation (`normalise_answer`): Unicode NFKC, whitespace collapsed, casefolded,
  then, for up to 8 rounds: one pair of surrounding quotes/backticks/markdown emphasis/
  ``$...$`` removed (unless the delimiter also occurs inside: '"a" and "b"' stays),
  a whole-string ``\text{...}`` or ``\boxed{...}`` unwrapped, trailing periods removed.
  Both the completion's answer and the reference go through the same function, so the
  comparison is symmetric.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from curate.core.reasoning import split_reasoning


def strip_think(text: str) -> str | None:
    """Remove the reasoning block; None when a ``<think>`` block is never closed.

    The answer of `curate.core.reasoning.split_reasoning`, the one split curate has."""
    return split_reasoning(text).answer


_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def _brace_pairs(text: str) -> dict[int, int]:
    r"""Map each ``{`` that is closed to its ``}``, in one linear pass.

    Escaped braces (``\{``, ``\}``) never count; unclosed ``{`` (truncated output) and
    stray ``}`` are left out. Linear on purpose: degenerate completions repeat
    ``\boxed{`` thousands of times, and graders must not stall on them.
    """
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            stack.append(i)
        elif char == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


@dataclass(frozen=True, slots=True)
class _Box:
    start: int  # the backslash of the command
    content_start: int
    content_end: int
    end: int  # one past the box


def _all_boxes(text: str) -> list[_Box]:
    """Every well-formed box, nested ones included, ordered by start."""
    pairs = _brace_pairs(text)
    boxes: list[_Box] = []
    for match in _BOX_COMMAND.finditer(text):
        i = match.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == "{":
            close = pairs.get(i)
            if close is not None:  # an unclosed box (truncated output) is no box
                boxes.append(_Box(match.start(), i + 1, close, close + 1))
        elif i > match.end():
            # ``\boxed 5``: the argument is the next whitespace/$-delimited token.
            j = i
            while j < len(text) and not text[j].isspace() and text[j] != "$":
                j += 1
            if j > i:
                boxes.append(_Box(match.start(), i, j, j))
    return boxes


def unwrap_boxes(text: str) -> str:
    r"""Replace every ``\boxed{X}`` in `text` by X, at any depth."""
    boxes = _all_boxes(text)
    if not boxes:
        return text
    # Drop each box's "\boxed{" and its closing brace; keep everything else.
    cuts = sorted(
        [(box.start, box.content_start) for box in boxes]
        + [(box.content_end, box.end) for box in boxes]
    )
    parts: list[str] = []
    pos = 0
    for cut_start, cut_end in cuts:
        parts.append(text[pos:cut_start])
        pos = max(pos, cut_end)
    parts.append(text[pos:])
    return "".join(parts)


def last_boxed(text: str) -> str | None:
    r"""Content of the last top-level ``\boxed{}``, nested boxes unwrapped; None if none."""
    last: _Box | None = None
    for box in _all_boxes(text):
        if last is None or box.start >= last.end:  # not nested in the previous top-level box
            last = box
    if last is None:
        return None
    return unwrap_boxes(text[last.content_start : last.content_end]).strip()


# No two adjacent [ \t]* can match the same spaces: that would make a long run of spaces
# after "answer" quadratic to scan.
_ANSWER_MARKER = re.compile(
    r"\banswer\b[ \t]*(?:\*\*[ \t]*)?(?:is\b(?:[ \t]*:)?|:|=)[ \t]*(?:\*\*[ \t]*)?",
    re.IGNORECASE,
)
_GSM8K_MARKER = re.compile(r"^[ \t]*####(.*)$", re.MULTILINE)
# A sentence ends at . ! ? followed by whitespace or the end; "3.5" is unaffected.
_SENTENCE_END = re.compile(r"[.!?。](?=\s|$)")


def _after_marker(text: str, start: int) -> str:
    rest = text[start:]
    lines = rest.split("\n")
    # "Answer:\n42": the answer is on the next non-empty line.
    line = next((candidate for candidate in lines if candidate.strip()), "")
    sentence_end = _SENTENCE_END.search(line)
    if sentence_end is not None:
        line = line[: sentence_end.start()]
    return line.strip()


def extract_final_answer(text: str) -> str | None:
    """The marked final answer in `text` (see module docstring), or None."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    markers = list(_ANSWER_MARKER.finditer(text))
    if markers:
        answer = _after_marker(text, markers[-1].end())
        if answer:
            return answer
    for gsm8k in reversed(list(_GSM8K_MARKER.finditer(text))):
        if gsm8k.group(1).strip():
            return gsm8k.group(1).strip()
    return None


_WRAPPERS: tuple[tuple[str, str], ...] = (
    ("**", "**"),
    ("__", "__"),
    ("*", "*"),
    ('"', '"'),
    ("'", "'"),
    ("“", "”"),
    ("‘", "’"),
    ("«", "»"),
    ("`", "`"),
    ("$", "$"),
    ("\\(", "\\)"),
    ("\\[", "\\]"),
)
_WRAPPING_COMMAND = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|boxed|fbox)\s*\{")
_TRAILING_PERIODS = ".。"
_MAX_UNWRAP_ROUNDS = 8


def _unwrap_command(text: str) -> str:
    r"""``\text{X}`` / ``\boxed{X}`` -> X when the command spans the whole string."""
    command = _WRAPPING_COMMAND.match(text)
    if command is not None and _brace_pairs(text).get(command.end() - 1) == len(text) - 1:
        return text[command.end() : -1]
    return text


def normalise_answer(text: str) -> str:
    """Canonical form of a short answer for equality tests (see module docstring)."""
    normalised = unicodedata.normalize("NFKC", text)
    normalised = " ".join(normalised.split()).casefold()
    # Real answers have a layer or two of wrapping; the cap keeps a degenerate completion
    # ("****...****" of 100k characters) linear instead of quadratic.
    for _ in range(_MAX_UNWRAP_ROUNDS):
        before = normalised
        normalised = normalised.strip().rstrip(_TRAILING_PERIODS).strip()
        normalised = _unwrap_command(normalised)
        for opening, closing in _WRAPPERS:
            if (
                len(normalised) >= len(opening) + len(closing)
                and normalised.startswith(opening)
                and normalised.endswith(closing)
            ):
                inner = normalised[len(opening) : len(normalised) - len(closing)]
                # '"a" and "b"' is two quoted things, not one wrapped answer.
                if closing not in inner and opening not in inner:
                    normalised = inner
                    break
        if normalised == before:
            break
    return normalised
