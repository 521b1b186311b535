"""The grader contract: `GradeResult`, the `Grader` protocol, and a base class for
graders that grade one rollout at a time in-process.

A grader turns (completion, reference) pairs into `GradeResult`s. A *wrong* answer is a
score of 0.0; a grader *failure* on one rollout (crash, timeout, bad return value) is a
result with `error` set and `score=None`, so the run stores an error row instead of
pretending the model was wrong. One failing rollout never affects the others in a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from curate.graders.text import strip_think

# Long exception messages (e.g. a repr of a huge sympy expression) would bloat the store.
MAX_ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class GradeResult:
    """The grade of one rollout. `score` is in [0, 1] and is None exactly when `error` is set."""

    score: float | None
    extracted: str | None
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.score is None) != (self.error is not None):
            raise ValueError("GradeResult: score must be None exactly when error is set")
        if self.score is not None and not (0.0 <= self.score <= 1.0):
            raise ValueError(f"GradeResult: score {self.score!r} is outside [0, 1]")


@runtime_checkable
class Grader(Protocol):
    """Anything that can grade a batch of completions against their references."""

    name: str

    def grade_batch(
        self, completions: Sequence[str], references: Sequence[object]
    ) -> list[GradeResult]: ...

    def close(self) -> None: ...


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
