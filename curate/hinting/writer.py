"""Hints written by a model (`curate hint --hint-model MODEL`): the model gets the
problem, its reference solution and the strength wanted, and writes the hint.

One greedy completion per prompt and level (temperature 0, the run's seed), through the
same backends as `curate eval`. A written hint that contains the final answer (as it
stands in the reference: the `#### X` line's X or the last line) is dropped, and so is an
empty one: the level then has no hint for that prompt, as a template leaves a
one-character answer without one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curate.core.sampling import SamplingConfig
from curate.hinting.templates import LEVELS, split_reference

# What each level asks of the hint writer.
STRENGTH = {
    1: "a gentle nudge: the first idea or the first step, nothing more",
    2: "about half of the way: the key step of the solution",
    3: "most of the way: every step but the last one",
}
HINT_PROMPT = (
    "You write hints for a student. Below are a problem and its reference solution. "
    "Write one hint of strength {level} of 3 ({strength}). The hint must not state the "
    "final answer. Reply with the hint only, in one or two sentences.\n\n"
    "Problem:\n{problem}\n\nReference solution:\n{reference}\n\nHint:"
)
HINT_MAX_TOKENS = 128


@dataclass(frozen=True)
class WrittenHints:
    """Per (sample id, level): the hint, or None with the reason in `dropped`."""

    hints: dict[tuple[str, int], str]
    dropped: dict[tuple[str, int], str]


def hint_prompt(problem: str, reference: str, level: int) -> str:
    """The request the hint writer reads for one prompt and level."""
    return HINT_PROMPT.format(
        level=level, strength=STRENGTH[level], problem=problem, reference=reference
    )


def usable(hint: str | None, reference: str) -> str | None:
    """Why a written hint is not used (None: it is)."""
    if hint is None or not hint.strip():
        return "empty"
    final = split_reference(reference).final
    if final and final in hint:
        return "states the final answer"
    return None


def write_hints(
    backend: Any,
    problems: Mapping[str, tuple[str, str]],
    *,
    seed: int,
    levels: Sequence[int] = LEVELS,
) -> WrittenHints:
    """Hints from an open `backend` for `problems` (sample id -> (problem text,
    reference text)), one per level."""
    from curate.backends.base import GenerationRequest
    from curate.core.seeds import derive_seed

    keys = [(sid, level) for sid in sorted(problems) for level in levels]
    chat = bool(backend.info().has_chat_template)

    def prompt(text: str) -> Any:
        return [{"role": "user", "content": text}] if chat else text

    requests = [
        GenerationRequest(
            sample_id=f"{sid}@hint{level}",
            prompt=prompt(hint_prompt(*problems[sid], level)),
            n=1,
            first_run=0,
            seed=derive_seed(seed, f"{sid}@hint{level}", 0),
        )
        for sid, level in keys
    ]
    sampling = SamplingConfig(temperature=0.0, top_p=1.0, max_tokens=HINT_MAX_TOKENS)
    generations = backend.generate(requests, sampling, "chat" if chat else "completion")
    hints: dict[tuple[str, int], str] = {}
    dropped: dict[tuple[str, int], str] = {}
    for key, gens in zip(keys, generations, strict=True):
        gen = gens[0] if gens else None
        text = None if gen is None or gen.error else gen.text
        reason = usable(text, problems[key[0]][1])
        if reason is None and text is not None:
            hints[key] = " ".join(text.split())
        else:
            dropped[key] = reason or "error"
    return WrittenHints(hints=hints, dropped=dropped)
