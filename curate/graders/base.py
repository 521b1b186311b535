"""The grader contract: `GradeResult`, the `Grader` protocol, and a base class for
graders that grade one rollout at a time in-process.

A grader turns (completion, reference) pairs into `GradeResult`s. A *wrong* answer is a
score of 0.0; a grader *failure* on one rollout (crash, timeout, bad return value) is a
result with `error` set and `score=None`, so the run stores an error row instead of
pretending the model was wrong. One failing rollout never affects the others in a batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from curate.core.options import OptionSchema
from curate.graders.text import strip_think

# One sample's other columns (data_source, reward_model, extra_info, prompt, solution...),
# for graders that read more than the reference: the trainer rewards.
SampleContext = Mapping[str, Any]

# Long exception messages (e.g. a repr of a huge sympy expression) would bloat the store.
MAX_ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class GradeResult:
    """The grade of one rollout. `score` is in [0, 1] and is None exactly when `error` is set.

    `raw_score` is what a reward function returned before a declared score range mapped
    it to [0, 1] (None when no range applied), so a report can show the trainer's value.
    """

    score: float | None
    extracted: str | None
    error: str | None = None
    raw_score: float | None = None

    def __post_init__(self) -> None:
        if (self.score is None) != (self.error is not None):
            raise ValueError("GradeResult: score must be None exactly when error is set")
        if self.score is not None and not (0.0 <= self.score <= 1.0):
            raise ValueError(f"GradeResult: score {self.score!r} is outside [0, 1]")
        if self.raw_score is not None and (self.score is None or not math.isfinite(self.raw_score)):
            raise ValueError("GradeResult: raw_score must be finite and comes with a score")


@runtime_checkable
class Grader(Protocol):
    """Anything that can grade a batch of completions against their references."""

    name: str

    def grade_batch(
        self, completions: Sequence[str], references: Sequence[object]
    ) -> list[GradeResult]: ...

    def close(self) -> None: ...


def needs_context(grader: object) -> bool:
    """True when `grader.grade_batch` takes per-sample `contexts` (see `grade`)."""
    return bool(getattr(grader, "needs_context", False))


def sees_reasoning(grader: object) -> bool:
    """True when `grader` reads the completion as the model wrote it, reasoning
    included (a trainer's own reward); the others read the answer only."""
    return bool(getattr(grader, "sees_reasoning", False))


def grade(
    grader: Grader,
    completions: Sequence[str],
    references: Sequence[object],
    contexts: Sequence[SampleContext] | None = None,
) -> list[GradeResult]:
    """Grade through any grader, handing per-sample context to the graders that read it.

    `contexts[i]` is the row of the sample that `completions[i]` answers. Graders that
    only compare with the reference (and third-party graders written against the
    two-argument protocol) are called without it.
    """
    if contexts is not None and needs_context(grader):
        if len(contexts) != len(completions):
            raise ValueError(f"grade: {len(completions)} completions but {len(contexts)} contexts")
        return grader.grade_batch(completions, references, contexts=contexts)  # type: ignore[call-arg]
    return grader.grade_batch(completions, references)


class GradingError(Exception):
    """A failure on one rollout whose message is already user-facing (no type prefix)."""


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Collapse `text` to one line of at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    """`TypeName: message` on one line, truncated, for an error row."""
    if isinstance(exc, GradingError):
        return one_line(str(exc))
    message = str(exc)
    return one_line(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def error_result(message: str) -> GradeResult:
    return GradeResult(score=None, extracted=None, error=one_line(message))


def failed(exc: BaseException) -> GradeResult:
    """The result for a rollout whose grading raised `exc`."""
    return error_result(describe_exception(exc))


# A completion that opened <think> and never closed it has no answer: wrong, not an error.
UNFINISHED_THINKING = GradeResult(score=0.0, extracted=None)


def check_lengths(completions: Sequence[str], references: Sequence[object]) -> None:
    if len(completions) != len(references):
        # A caller bug, not a per-rollout failure: fail loudly.
        raise ValueError(
            f"grade_batch: {len(completions)} completions but {len(references)} references"
        )


def as_score(ok: bool) -> float:
    return 1.0 if ok else 0.0


class InProcessGrader:
    """Base for graders that score each rollout in this process with `grade_one`.

    Handles the shared rules: length check, `<think>` stripping (an unfinished thinking
    block scores 0.0 without calling `grade_one`), and turning any exception on one
    rollout into an error result for that rollout only.
    """

    name: str

    def __init__(self, name: str) -> None:
        self.name = name

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        """Grade one completion (already stripped of reasoning) against its reference."""
        raise NotImplementedError

    def grade_batch(
        self, completions: Sequence[str], references: Sequence[object]
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        results: list[GradeResult] = []
        for completion, reference in zip(completions, references, strict=True):
            try:
                answer_text = strip_think(completion)
                if answer_text is None:
                    results.append(UNFINISHED_THINKING)
                    continue
                results.append(self.grade_one(answer_text, reference))
            except Exception as exc:  # one bad rollout must not sink the batch
                results.append(failed(exc))
        return results

    def close(self) -> None:
        """Nothing to free for in-process graders."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def alternatives(reference: object) -> list[object]:
    """A list/tuple reference means "any of these answers is correct"."""
    if isinstance(reference, list | tuple):
        if not reference:
            raise GradingError("reference is an empty list of answers")
        return list(reference)
    return [reference]


@dataclass(frozen=True, slots=True)
class ScoreRange:
    """The range a continuous reward lives in; `normalise` maps it onto [0, 1]."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(
                f"score_range needs two finite numbers, low < high; got ({self.low!r}, "
                f"{self.high!r})"
            )

    def normalise(self, raw: float) -> float:
        return (raw - self.low) / (self.high - self.low)

    def __str__(self) -> str:
        return f"[{self.low:g}, {self.high:g}]"


def reward_value(value: object, label: str, *, ranged: bool = False) -> float:
    """A user function's return value as a float, or `GradingError` saying why not.

    Bools (Python and numpy) are 1.0 / 0.0. `label` names the function in the message
    ("python grader", "verl reward"); `ranged` says a score range was declared, so any
    number is expected rather than one in [0, 1].
    """
    expected = "a number or a bool" if ranged else "a float in [0, 1] or a bool"
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ in {"bool_", "bool"}:
        return 1.0 if bool(value) else 0.0
    # Duck-typed so the worker process need not import numbers/decimal classes by name:
    # int, float, Decimal, Fraction, numpy floats and ints all convert.
    if isinstance(value, int | float) or (
        kind.__module__ in {"numpy", "decimal", "fractions"} and hasattr(value, "__float__")
    ):
        raw = float(value)  # type: ignore[arg-type]
    else:
        raise GradingError(f"{label} returned {kind.__name__}; expected {expected}")
    if math.isnan(raw):
        raise GradingError(f"{label} returned NaN; expected {expected}")
    return raw


def scored(
    raw: float, label: str, score_range: ScoreRange | None, extracted: str | None = None
) -> GradeResult:
    """The result for a raw reward: checked against [0, 1], or mapped from `score_range`.

    A value outside the range it should be in is an error row, never clipped: a reward
    of 2.0 in a [0, 1] world is a bug in the function or in the declared range.
    """
    if score_range is None:
        if not 0.0 <= raw <= 1.0:
            raise GradingError(f"{label} returned {raw!r}, outside [0, 1]")
        return GradeResult(score=raw, extracted=extracted)
    if not score_range.low <= raw <= score_range.high:
        raise GradingError(f"{label} returned {raw!r}, outside score_range {score_range}")
    score = min(1.0, max(0.0, score_range.normalise(raw)))  # rounding at the edges only
    return GradeResult(score=score, extracted=extracted, raw_score=raw)


# The per-call deadline of graders that run in worker processes (--grader-timeout).
DEFAULT_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class GraderOptions:
    """What `get_grader` hands every grader factory besides the spec.

    `timeout_s`: the per-call deadline of graders that run in worker processes (math,
    python, verl, trl). `score_range`: a continuous reward's range (python, verl, trl
    only). `workers`: worker processes for those graders (None: the pool's default).
    `kind_options`: the grader kind's own options, an instance of the schema the kind
    declares (`curate.graders.registry.options_schema`: the judge's `JudgeConfig`, the
    reward model's `RewardModelConfig`, a plugin factory's `options`), validated once;
    None when none were given.
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    score_range: ScoreRange | None = None
    workers: int | None = None
    kind_options: OptionSchema | None = None
