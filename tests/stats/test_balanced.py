"""Balanced groups and their correction: the counts, and a simulation showing that the
corrected group's update equals the whole pool's in expectation while the uncorrected
one does not.

The simulated policy is a softmax over a few distinct completions per prompt (some right,
some wrong), so every rollout has a real score-function gradient e_a - pi; each prompt's
pass rate comes from a population of one of three classes (point masses, a bimodal
mixture, a Beta), none of them centred on 1/2, where balancing changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from curate.errors import UsageError
from curate.stats.balanced import (
    balanced_group,
    balanced_passes,
    check_group_size,
    class_ratios,
    pool_advantages,
)
from curate.stats.weights import objective_weight

COMPLETIONS = 6  # distinct completions per prompt: 3 right, 3 wrong
POOL = 32
GROUP = 8
PROMPTS = 300
DRAWS = 150  # balanced groups drawn per pool


def test_group_size_must_be_even() -> None:
    check_group_size(2)
    check_group_size(16)
    for bad in (0, 1, 7):
        with pytest.raises(UsageError, match="even"):
            check_group_size(bad)


def test_balanced_passes_takes_half_when_it_can() -> None:
    assert balanced_passes(32, 4, 8) == 4
    assert balanced_passes(32, 2, 8) == 2  # scarce passes: all of them
    assert balanced_passes(32, 30, 8) == 6  # scarce fails: all of them, passes fill
    assert balanced_passes(8, 1, 8) == 1  # a pool of exactly n is taken whole
    assert balanced_passes(32, 0, 8) is None  # one class only: nothing to balance
    assert balanced_passes(32, 32, 8) is None
    assert balanced_passes(6, 3, 8) is None  # cannot fill the group


def test_even_group_advantages_are_one_scalar() -> None:
    scores = [1.0] * 4 + [0.0] * 28
    group = balanced_group(scores, 8, 2.0, random.Random(0))
    assert group is not None
    p = 4 / 32
    expected = 2 * p * (1 - p) * 2.0
    assert sorted(group.advantages) == pytest.approx([-expected] * 4 + [expected] * 4)
    assert sum(group.advantages) == pytest.approx(0.0)
    assert class_ratios(32, 4, 8, 4) == pytest.approx((p / 0.5, (1 - p) / 0.5))


def _point_masses(rng: np.random.Generator) -> float:
    return float(rng.choice([0.08, 0.8], p=[0.6, 0.4]))


def _bimodal(rng: np.random.Generator) -> float:
    return float(
        np.clip(rng.normal(0.06, 0.02) if rng.random() < 0.7 else rng.normal(0.9, 0.03), 0.01, 0.99)
    )


def _beta(rng: np.random.Generator) -> float:
    return float(np.clip(rng.beta(0.7, 2.5), 0.01, 0.99))


POPULATIONS: dict[str, Callable[[np.random.Generator], float]] = {
    "point masses": _point_masses,
    "bimodal": _bimodal,
    "beta": _beta,
}


def _policy(p: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A softmax policy over COMPLETIONS with pass rate p: (probabilities, rewards)."""
    half = COMPLETIONS // 2
    probs = np.concatenate(
        [p * rng.dirichlet(np.ones(half)), (1 - p) * rng.dirichlet(np.ones(half))]
    )
    rewards = np.array([1.0] * half + [0.0] * half)
    return probs, rewards


def _weight_on_gradient(update: np.ndarray, grad: np.ndarray) -> float:
    """The update's component along the prompt's true gradient of p, in units of it: the
    weight the update puts on the prompt (w(p) in expectation for an unbiased one)."""
    return float(update @ grad / (grad @ grad))


@pytest.mark.parametrize("objective", ["log", "arcsin"])
@pytest.mark.parametrize("population", list(POPULATIONS))
def test_corrected_balanced_groups_match_the_pool(population: str, objective: str) -> None:
    rng = np.random.default_rng(11)
    pick = random.Random(5)
    corrected_gap, uncorrected_gap, pool_weights = [], [], []
    for _ in range(PROMPTS):
        p = POPULATIONS[population](rng)
        probs, rewards = _policy(p, rng)
        scores_fn = np.eye(COMPLETIONS) - probs  # row a: d log pi(a) / d logits
        grad = (probs * rewards) @ scores_fn  # the true gradient of p
        pool = rng.choice(COMPLETIONS, size=POOL, p=probs)
        scores = [float(rewards[a]) for a in pool]
        passes = sum(s >= 1.0 for s in scores)
        if balanced_passes(POOL, passes, GROUP) is None:
            continue  # one class only: the pool's update is 0 too (r - b = 0)
        w = objective_weight(min(max(passes / POOL, 0.05), 0.95), objective)
        pool_update = np.array(pool_advantages(scores, w)) @ scores_fn[pool] / POOL
        target = _weight_on_gradient(pool_update, grad)
        corrected, uncorrected = [], []
        baseline = sum(scores) / POOL
        for _ in range(DRAWS):
            group = balanced_group(scores, GROUP, w, pick)
            assert group is not None
            rows = scores_fn[pool[group.members]]
            corrected.append(_weight_on_gradient(np.array(group.advantages) @ rows / GROUP, grad))
            plain = [w * (scores[i] - baseline) for i in group.members]
            uncorrected.append(_weight_on_gradient(np.array(plain) @ rows / GROUP, grad))
        corrected_gap.append(np.mean(corrected) - target)
        uncorrected_gap.append(np.mean(uncorrected) - target)
        pool_weights.append(target)
    assert len(pool_weights) > PROMPTS // 3
    scale = float(np.mean(pool_weights))
    c_gap, u_gap = np.array(corrected_gap), np.array(uncorrected_gap)
    c_se = c_gap.std(ddof=1) / np.sqrt(len(c_gap))
    u_se = u_gap.std(ddof=1) / np.sqrt(len(u_gap))
    # Corrected: the mean gap is noise (within 4 standard errors) and small against w.
    assert abs(c_gap.mean()) < 4 * c_se + 1e-12, (c_gap.mean(), c_se)
    assert abs(c_gap.mean()) < 0.02 * scale
    # Uncorrected: a bias many standard errors away and a sizeable share of w.
    assert abs(u_gap.mean()) > 8 * u_se, (u_gap.mean(), u_se)
    assert abs(u_gap.mean()) > 0.2 * scale, (u_gap.mean(), scale)


@pytest.mark.parametrize(
    "scores",
    [
        [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # one pass: all of it, fails fill
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0],  # one fail
        [1.0, 0.5, 0.0, 1.0, 0.25, 0.0, 0.75],  # partial credit counts as not passing
    ],
)
def test_the_identity_is_exact_over_every_possible_group(scores: list[float]) -> None:
    """Enumerate every group `balanced_group` can draw (uniform within each class): the
    mean of the corrected updates equals the pool's, for arbitrary per-rollout gradient
    vectors, any objective weight and partial-credit rewards."""
    import itertools

    size, weight = 4, 1.7
    grads = np.random.default_rng(3).normal(size=(len(scores), 5))
    pool = np.array(pool_advantages(scores, weight)) @ grads / len(scores)
    passing = [i for i, s in enumerate(scores) if s >= 1.0]
    failing = [i for i, s in enumerate(scores) if s < 1.0]
    taken = balanced_passes(len(scores), len(passing), size)
    assert taken is not None
    rho_pass, rho_fail = class_ratios(len(scores), len(passing), size, taken)
    baseline = sum(scores) / len(scores)
    updates = []
    for ups in itertools.combinations(passing, taken):
        for downs in itertools.combinations(failing, size - taken):
            members = [*ups, *downs]
            adv = [
                weight * (rho_pass if i in ups else rho_fail) * (scores[i] - baseline)
                for i in members
            ]
            updates.append(np.array(adv) @ grads[members] / size)
    assert np.mean(updates, axis=0) == pytest.approx(pool, abs=1e-12)
    # and the draw itself lands on one of those groups, with those advantages
    group = balanced_group(scores, size, weight, random.Random(1))
    assert group is not None and len(group.members) == size
    assert sum(scores[i] >= 1.0 for i in group.members) == taken
