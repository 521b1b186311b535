r"""The `math` grader: symbolic equivalence with the `math_verify` package, run in a
process pool so that a pathological expression cannot hang the run.

How it works and what a user should know:

* Extraction: the (think-stripped) completion is parsed by ``math_verify.parse`` with
  ``\boxed{}`` given the highest priority, then "final answer" phrases and bare
  expressions (math_verify's own rules). The reference is parsed as LaTeX (wrapped in
  ``$...$`` unless it already has delimiters or a box). A reference math_verify cannot
  parse is an error row, not a wrong answer. A list/tuple reference means any of them.
* Isolation, timeout, crashes: see `curate.graders.pool` (a spawn process pool; each
  item gets `timeout_s` seconds once a started worker takes it; a hang or a dead worker
  is that item's error row, ``grader timeout after Xs`` or ``math grader worker process
  died``, never a 0 score). math_verify's own signal-based timeouts are switched off
  because they turn a timeout into a silent "wrong"; the pool's deadline replaces them.
* The worker function is injectable (`MathGrader(worker=...)`) so tests can simulate hangs
  and crashes; it must be a module-level function (it is pickled by reference).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

from curate.errors import MissingExtraError, UsageError
from curate.graders.base import (
    DEFAULT_TIMEOUT_S,
    UNFINISHED_THINKING,
    GradeResult,
    GraderOptions,
    GradingError,
    SampleContext,
    alternatives,
    error_result,
)
from curate.graders.pool import (
    DEFAULT_WORKERS,
    STARTUP_TIMEOUT_S,
    PooledGrader,
    check_timeout,
)
from curate.graders.text import strip_think

# (completion, reference alternatives as text) -> (score in [0, 1], extracted answer)
WorkerFn = Callable[[str, tuple[str, ...]], tuple[float, str | None]]


def verify_one(completion: str, references: tuple[str, ...]) -> tuple[float, str | None]:
    """Grade one completion with math_verify. Runs inside a pool worker."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    gold: list[Any] = []
    for reference in references:
        gold.extend(_parse_reference(reference))
    if not gold:
        raise GradingError(f"math_verify could not parse the reference {references[0][:60]!r}")
    predicted = parse(
        completion,
        extraction_config=[LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
        parsing_timeout=None,  # the pool enforces the timeout
    )
    if not predicted:
        return 0.0, None
    # parse() returns [sympy_expr, source_text], or [source_text] when only a string matched.
    extracted = predicted[-1] if isinstance(predicted[-1], str) else str(predicted[0])
    ok = verify(gold, predicted, timeout_seconds=None)
    return (1.0 if ok else 0.0), extracted


def _parse_reference(reference: str) -> list[Any]:
    from math_verify import parse

    text = reference.strip()
    if not text:
        return []
    # An escaped dollar (MATH writes \$5) is currency, not a math delimiter.
    unescaped = text.replace("\\$", "")
    has_delimiters = any(mark in unescaped for mark in ("$", "\\boxed", "\\(", "\\["))
    parsed: list[Any] = []
    if not has_delimiters:
        # Bare LaTeX ("\frac{1}{2}", "x^2+1") is only recognised inside math delimiters.
        parsed = parse(f"${text}$", parsing_timeout=None)
    if not parsed:
        parsed = parse(text, parsing_timeout=None)
    return list(parsed)


def _run_worker(
    worker: WorkerFn, completion: str, references: tuple[str, ...]
) -> tuple[float, str | None]:
    """The pool task: the (injectable) worker function on one item."""
    return worker(completion, references)


def _check_outcome(outcome: object) -> GradeResult:
    """Validate what came back from a worker (an injected worker may return anything)."""
    if not (isinstance(outcome, tuple) and len(outcome) == 2):
        return error_result(f"math grader worker returned {type(outcome).__name__}")
    score, extracted = outcome
    if isinstance(score, bool) or not isinstance(score, int | float):
        return error_result(f"math grader worker returned a {type(score).__name__} score")
    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
        return error_result(f"math grader worker returned score {score!r}, outside [0, 1]")
    if extracted is not None and not isinstance(extracted, str):
        extracted = str(extracted)
    return GradeResult(score=float(score), extracted=extracted)


class MathGrader(PooledGrader):
    """math_verify equivalence in a spawn process pool with a per-item timeout."""

    label = "math grader"

    def __init__(
        self,
        name: str = "math",
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workers: int = DEFAULT_WORKERS,
        worker: WorkerFn = verify_one,
        preload: tuple[str, ...] = ("math_verify",),
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        # The worker function's module is imported at start-up too, so that importing
        # it never eats into the first item's deadline.
        modules = tuple(dict.fromkeys((*preload, worker.__module__)))
        super().__init__(
            name,
            task=_run_worker,
            timeout_s=timeout_s,
            workers=workers,
            preload=modules,
            startup_timeout_s=startup_timeout_s,
        )
        self._worker = worker

    def payload(
        self, completion: str, reference: object, context: SampleContext | None
    ) -> tuple[Any, ...] | GradeResult:
        answer_text = strip_think(completion)
        if answer_text is None:
            return UNFINISHED_THINKING
        options = tuple(_reference_latex(option) for option in alternatives(reference))
        return (self._worker, answer_text, options)

    def to_result(self, value: object) -> GradeResult:
        return _check_outcome(value)

    def __repr__(self) -> str:
        return f"MathGrader({self.name!r}, timeout_s={self.timeout_s!r}, workers={self.workers})"


def _reference_latex(reference: object) -> str:
    if reference is None:
        raise GradingError("reference is missing (None)")
    if isinstance(reference, float) and math.isfinite(reference) and reference.is_integer():
        return str(int(reference))
    return str(reference)


MATH_EXTRA_HINT = "install the math extra: pip install 'curate[math]'"


def math_grader(spec: str, argument: str | None, options: GraderOptions) -> MathGrader:
    """The registry's factory for ``math`` (checks for math_verify before any pool starts)."""
    if argument is not None:
        raise UsageError(f"grader {spec!r}: 'math' takes no options")
    if importlib.util.find_spec("math_verify") is None:
        raise MissingExtraError(f"grader {spec!r} needs the math_verify package; {MATH_EXTRA_HINT}")
    check_timeout(spec, options.timeout_s)
    workers = options.workers or DEFAULT_WORKERS
    return MathGrader(spec, timeout_s=options.timeout_s, workers=workers)
