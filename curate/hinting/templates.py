"""The hint templates: a hint of strength 1..3 built from a reference solution.

A reference is split into a worked solution (its steps) and a final answer
(`split_reference`). With a worked solution of S >= 2 steps, a level-k hint shows its
leading ceil(k * S / 4) steps, never all S: a quarter, a half, three quarters of the
way. Otherwise (an answer-only reference such as `45`, or a single step), a level-k hint
shows the leading ceil(k * L / 4) characters of the L of the final answer, never all of
them: "the answer starts with 4". A hint never contains the final answer line, nor the
last step of a worked solution.

One hint per prompt and level: the mixed-group odds 1 - p^G - (1 - p)^G are concave
in p, so rollouts spread over many hints of one prompt open fewer gates than the same
rollouts on the one hint whose pass rate is nearest 1/2. A level whose hint repeats the
level below it (a two-step solution has the same quarter and half) is left out: its
rollouts would measure the same condition twice.

The hint goes after the prompt, on its own line (`HINT_PREFIX`); `hinted_text` is the
one place that writes it, and scripts/train_tiny_model.py teaches the bundled model the
same form.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

LEVELS: tuple[int, ...] = (1, 2, 3)
# What starts the hint's line after the prompt.
HINT_PREFIX = "Hint: "
TEMPLATE_SOURCE = "template"
# A GSM8K-style final answer line, "#### 42".
_FINAL_LINE = re.compile(r"^[ \t]*####[ \t]*(.+?)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Reference:
    """A reference solution split into its worked steps (possibly none) and its final
    answer."""

    steps: tuple[str, ...]
    final: str


def split_reference(text: str) -> Reference:
    """The steps and final answer of `text`: a `#### X` line ends a worked solution (its
    other non-empty lines are the steps); otherwise the last non-empty line is the
    final answer and the lines before it the steps."""
    matches = list(_FINAL_LINE.finditer(text))
    if matches:
        match = matches[-1]
        before = text[: match.start()]
        steps = tuple(line.strip() for line in before.splitlines() if line.strip())
        return Reference(steps=steps, final=match.group(1).strip())
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return Reference(steps=(), final="")
    return Reference(steps=tuple(lines[:-1]), final=lines[-1])


def template_hint(reference: str, level: int) -> str | None:
    """The level-`level` hint of `reference` (None when the reference leaves nothing to
    show short of the answer: an empty or one-character answer-only reference)."""
    if level not in LEVELS:
        raise ValueError(f"hint level must be one of {LEVELS}, not {level}")
    ref = split_reference(reference)
    if len(ref.steps) >= 2:
        shown = min(len(ref.steps) - 1, math.ceil(level * len(ref.steps) / 4))
        return " ".join(ref.steps[:shown])
    n = min(len(ref.final) - 1, math.ceil(level * len(ref.final) / 4))
    if n < 1:
        return None
    return f"the answer starts with {ref.final[:n]}"


def template_hints(reference: str) -> dict[int, str]:
    """Level -> hint for every level with a hint of its own (a level repeating the one
    below it is left out)."""
    out: dict[int, str] = {}
    previous: str | None = None
    for level in LEVELS:
        hint = template_hint(reference, level)
        if hint is not None and hint != previous:
            out[level] = hint
        previous = hint if hint is not None else previous
    return out


def hinted_text(prompt: str, hint: str) -> str:
    """The prompt with its hint on a line of its own after it."""
    return f"{prompt}\n{HINT_PREFIX}{hint}"


def hinted_id(sample_id: str, level: int) -> str:
    """The id of a sample's level-`level` hinted prompt in the hinted run."""
    return f"{sample_id}@hint{level}"
