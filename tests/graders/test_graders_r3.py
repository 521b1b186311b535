"""R3's arithmetic (curate/graders/r3.py): spread, weights, scores, and the spec."""

from __future__ import annotations

import math
import random

import pytest

from curate.errors import UsageError
from curate.graders import get_grader
from curate.graders.base import GradingError
from curate.graders.r3 import (
    MIN_LOGPROB,
    TAU,
    R3Grader,
    is_group_prefill,
    r3_scores,
    reference_text,
    token_spread,
    token_weights,
)


def test_spread_is_the_population_std_of_each_tokens_probability() -> None:
    group = [[math.log(0.9), math.log(0.5)], [math.log(0.1), math.log(0.5)]]
    spread = token_spread(group)
    assert spread == pytest.approx([0.4, 0.0])


def test_weights_are_a_softmax_of_spread_over_tau() -> None:
    weights = token_weights([0.4, 0.0], tau=0.1)
    assert sum(weights) == pytest.approx(1.0)
    assert weights[0] / weights[1] == pytest.approx(math.exp(4.0))
    assert token_weights([0.2, 0.2, 0.2]) == pytest.approx([1 / 3] * 3)


def test_score_is_exp_of_the_weighted_log_likelihood() -> None:
    group = [[math.log(0.9), math.log(0.5)], [math.log(0.1), math.log(0.5)]]
    weights = token_weights(token_spread(group), TAU)
    for row, result in zip(group, r3_scores(group), strict=True):
        raw = sum(w * lp for w, lp in zip(weights, row, strict=True))
        assert result.raw == pytest.approx(raw)
        assert result.score == pytest.approx(math.exp(raw))


def test_a_group_without_spread_weights_tokens_uniformly_and_scores_equal() -> None:
    """The class: identical reasoning (or a group of one) carries no comparative signal."""
    row = [math.log(0.7), math.log(0.2), math.log(0.99)]
    scores = r3_scores([row, row, row])
    assert len({s.score for s in scores}) == 1
    assert scores[0].raw == pytest.approx(sum(row) / 3)
    assert r3_scores([row])[0].raw == pytest.approx(sum(row) / 3)


def test_more_certain_on_every_token_never_scores_lower() -> None:
    """The class: random groups; a rollout dominating another token by token ranks
    at least as high, and every score is in [0, 1]."""
    rng = random.Random(7)
    for _ in range(200):
        width, size = rng.randint(1, 12), rng.randint(2, 9)
        group = [[math.log(rng.uniform(1e-6, 1.0)) for _ in range(width)] for _ in range(size)]
        better = [min(0.0, lp + rng.uniform(0, 2)) for lp in group[0]]
        scores = r3_scores([*group, better])
        assert all(0.0 <= s.score <= 1.0 for s in scores)
        assert scores[-1].score >= scores[0].score - 1e-12


def test_reflective_tokens_outweigh_formatting_tokens() -> None:
    """A token whose certainty follows the reasoning gets the weight; one every
    rollout is sure of (formatting) gets little, so R3 follows the reflective token."""
    right = [math.log(0.99), math.log(0.95)]  # format token, answer digit
    wrong = [math.log(0.99), math.log(0.02)]
    weights = token_weights(token_spread([right, wrong, right, wrong]))
    assert weights[1] > 0.9
    scores = r3_scores([right, wrong])
    assert scores[0].score > 0.9 > 0.1 > scores[1].score


def test_log_probabilities_are_clamped_finite() -> None:
    scores = r3_scores([[float("-inf")], [0.0]])
    assert scores[0].raw == pytest.approx(MIN_LOGPROB)
    assert scores[0].score == 0.0 and scores[1].score == 1.0


def test_ragged_groups_are_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="different numbers of tokens"):
        token_spread([[0.0], [0.0, 0.0]])


def test_spec_and_tau() -> None:
    grader = get_grader("r3")
    assert isinstance(grader, R3Grader) and grader.tau == TAU and is_group_prefill(grader)
    assert get_grader("R3:tau=0.5").tau == 0.5  # type: ignore[attr-defined]
    for bad in ("r3:tau=0", "r3:tau=x", "r3:temp=1", "r3:tau=nan"):
        with pytest.raises(UsageError, match="r3"):
            get_grader(bad)


def test_outside_eval_it_grades_nothing_and_says_why() -> None:
    results = get_grader("r3").grade_batch(["a"], ["b"])
    assert results[0].score is None and "curate eval" in (results[0].error or "")


@pytest.mark.parametrize("reference", ["", "   ", None, ["a", "b"], True])
def test_unusable_references(reference: object) -> None:
    with pytest.raises(GradingError):
        reference_text(reference)
    assert reference_text(42) == "42"
