"""R3, the reasoning reflection reward of Direct Reasoning Optimization (DRO, Xu et al.,
arXiv 2506.13351): a grade for tasks with a reference answer and no verifier.

The model that wrote a group of rollouts scores each one by its own certainty of the
reference answer after that rollout's reasoning (one prefill of prompt, reasoning,
reference; `curate.backends.prefill`). Certainty is the probability of each reference
token, p[i][j] for rollout i and reference token j. Tokens whose certainty barely moves
across the group (formatting, the words any reasoning leads to) say nothing about the
reasoning; the ones that move are the "reasoning-reflective" tokens, and R3 weights
tokens by how much they move:

    sigma_j  = the population standard deviation of p[0..G-1][j] across the group
    w_j      = softmax_j(sigma_j / tau)           (weights sum to 1; tau = TAU)
    raw_i    = sum_j w_j * log p[i][j]            (the weighted log-likelihood, <= 0)
    score_i  = exp(raw_i)                         (in (0, 1], the weighted geometric mean)

The paper defines the weights from the per-token standard deviation across rollouts with a
temperature; its exact constant is not restated here: TAU = 0.1 is curate's choice (with
sigma in [0, 0.5], it keeps the weights within a factor e^5 of each other), set with
``r3:tau=X``. A group whose rollouts leave every token's certainty equal (a group of one,
or identical reasoning) has uniform weights, and equal scores. `score` is a monotone map of
`raw` (ranks, AUROC and the order of a group are the same); `raw_score` keeps the raw value.

This module holds the arithmetic and the grader object the registry builds; the prefill is
the backend's (`curate.backends.prefill`) and the group flow the engine's
(`curate.evaluation.r3`). The grader's own `grade_batch` cannot grade (it has no model): an
error row saying so, for `curate grade` and other callers outside `curate eval`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from curate.errors import UsageError
from curate.graders.base import GradeResult, GraderOptions, GradingError, error_result

# The softmax temperature of the token weights (see the module docstring).
TAU = 0.1
# Log-probabilities below this are clamped (an OpenAI-compatible server clamps at -9999).
MIN_LOGPROB = -9999.0
# The text between a non-reasoning rollout's completion and the reference it is scored on.
ANSWER_BRIDGE = "\n"
OUTSIDE_EVAL = "r3 grades a group of rollouts with the model that wrote them: run it in curate eval"


@dataclass(frozen=True, slots=True)
class R3Score:
    """One rollout's R3: `raw` (the weighted log-likelihood) and `score` = exp(raw)."""

    raw: float
    score: float


def clamp(logprob: float) -> float:
    """A log-probability as R3 reads it: finite, at least MIN_LOGPROB, at most 0."""
    if math.isnan(logprob):
        raise ValueError("log-probability is NaN")
    return min(0.0, max(MIN_LOGPROB, logprob))


def token_spread(group: Sequence[Sequence[float]]) -> list[float]:
    """Per reference token, the population std of its probability across `group`
    (the rollouts' log-probabilities of the same reference tokens)."""
    if not group:
        return []
    width = len(group[0])
    if any(len(row) != width for row in group):
        raise ValueError("r3: the rollouts of a group scored different numbers of tokens")
    spread = []
    for j in range(width):
        probs = [math.exp(clamp(row[j])) for row in group]
        mean = sum(probs) / len(probs)
        spread.append(math.sqrt(sum((p - mean) ** 2 for p in probs) / len(probs)))
    return spread


def token_weights(spread: Sequence[float], tau: float = TAU) -> list[float]:
    """softmax(spread / tau): the weights of the reference tokens, summing to 1."""
    if not spread:
        return []
    top = max(spread)
    raw = [math.exp((s - top) / tau) for s in spread]
    total = sum(raw)
    return [r / total for r in raw]


def r3_scores(group: Sequence[Sequence[float]], tau: float = TAU) -> list[R3Score]:
    """The R3 of every rollout of one group, from its reference log-probabilities."""
    weights = token_weights(token_spread(group), tau)
    out = []
    for row in group:
        raw = sum(w * clamp(lp) for w, lp in zip(weights, row, strict=True))
        out.append(R3Score(raw=raw, score=min(1.0, max(0.0, math.exp(raw)))))
    return out


def reference_text(reference: object) -> str:
    """The reference a rollout is scored on, as text; GradingError when there is none."""
    if isinstance(reference, list | tuple):
        raise GradingError("r3 scores one reference answer, not a list of alternatives")
    if isinstance(reference, bool) or reference is None:
        raise GradingError(f"r3 needs a reference answer as text, not {reference!r}")
    text = str(reference)
    if not text.strip():
        raise GradingError("r3 needs a non-empty reference answer")
    return text


def parse_tau(argument: str | None, spec: str) -> float:
    """The temperature of ``r3:tau=X`` (TAU without an argument)."""
    if argument is None or not argument.strip():
        return TAU
    key, sep, value = argument.strip().partition("=")
    if key.strip() != "tau" or not sep:
        raise UsageError(f"grader {spec!r}: expected r3 or r3:tau=X")
    try:
        tau = float(value)
    except ValueError:
        raise UsageError(f"grader {spec!r}: tau must be a number, got {value!r}") from None
    if not (math.isfinite(tau) and tau > 0):
        raise UsageError(f"grader {spec!r}: tau must be a positive number, got {value!r}")
    return tau


class R3Grader:
    """The `r3` grader: its settings, and what the reference check asks of it.

    The engine sees `group_prefill` and grades a sample's rollouts together
    (`curate.evaluation.r3`); `grade_batch` alone has no model and returns error rows.
    """

    group_prefill = True
    sees_reasoning = False

    def __init__(self, name: str, tau: float = TAU) -> None:
        self.name = name
        self.tau = tau

    def correct_completions(self, reference: object, context: object) -> None:
        """Nothing to try: a usable reference is non-empty text (GradingError otherwise)."""
        reference_text(reference)
        return None

    def grade_batch(
        self, completions: Sequence[str], references: Sequence[object]
    ) -> list[GradeResult]:
        return [error_result(OUTSIDE_EVAL) for _ in completions]

    def scores(self, group: Sequence[Sequence[float]]) -> list[R3Score]:
        return r3_scores(group, self.tau)

    def close(self) -> None:
        """Nothing to free."""

    def __repr__(self) -> str:
        return f"R3Grader({self.name!r}, tau={self.tau:g})"


def is_group_prefill(grader: object) -> bool:
    """True for a grader the engine grades per group with the model's prefill (r3)."""
    return bool(getattr(grader, "group_prefill", False))


def r3_grader(spec: str, argument: str | None, options: GraderOptions) -> R3Grader:
    """The registry's factory for ``r3`` / ``r3:tau=X``."""
    return R3Grader(spec, parse_tau(argument, spec))
