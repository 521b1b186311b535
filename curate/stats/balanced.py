"""Balanced groups from an oversampled pool, and the correction that keeps the objective.

Oversample a prompt to a pool of N rollouts (K of them passing), then keep a group of
n with as even a split of passes and fails as the pool allows (Reinforce-Ada's
"oversample, downsample, correct", arXiv 2510.04996). Choosing by outcome changes how
often each outcome appears: a passing rollout is K/N of the pool but k/n of the group.
Each kept rollout is therefore weighted by its class's importance ratio

    rho_pass = (K / N) / (k / n)        rho_fail = ((N - K) / N) / ((n - k) / n)

which makes the group's update, in expectation over which members of each class were
kept, equal to the whole pool's update with the same baseline and objective weight:

    A_j = w * rho_j * (r_j - b)          b = the pool's mean score, w = f'(p) (`weights`)

The identity holds for any baseline and any rollout gradients (a uniform draw within a
class has the class's mean), so it needs no model of the gradients; it is conditional on
the pool: whatever bias the pool's own estimate carries (a sequential stopping rule's,
the baseline's O(1/N)) it keeps. On an even group (k = n/2) of 0/1 rewards every
advantage is +-2 p~(1 - p~) w with p~ = K/N: one scalar per group.

Pure arithmetic on counts: frames and files are the exporters' (`curate.exports.rollouts`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from curate.core.outcome import PASS_SCORE
from curate.errors import UsageError

DEFAULT_BALANCED_SIZE = 8
# The group weight when no objective is chosen: w = 1, the plain pass rate's gradient.
DEFAULT_OBJECTIVE = "linear"


def check_group_size(n: int) -> None:
    """UsageError unless n is an even number of at least 2 (half passes, half fails)."""
    if n < 2 or n % 2:
        raise UsageError(f"--group-size must be an even number of at least 2 (got {n})")


def balanced_passes(pool: int, passes: int, size: int) -> int | None:
    """How many passing rollouts a balanced group of `size` takes from a pool of `pool`
    rollouts with `passes` passing: size/2 when both classes have enough, else as many
    of the scarce class as there are. None when the pool cannot fill the group or has
    only one class (no signal to balance)."""
    if pool < size or passes <= 0 or passes >= pool:
        return None
    fails = pool - passes
    return min(passes, max(size // 2, size - fails))


@dataclass(frozen=True)
class BalancedGroup:
    """The members chosen (indices into the pool) and their corrected advantages."""

    members: list[int]
    advantages: list[float]
    ratios: list[float]
    """The importance ratio of each member's class (pool share / group share)."""
    baseline: float


def class_ratios(pool: int, passes: int, size: int, taken: int) -> tuple[float, float]:
    """(rho_pass, rho_fail) for a group of `size` holding `taken` of the pool's `passes`."""
    fails, kept_fails = pool - passes, size - taken
    rho_pass = (passes / pool) / (taken / size) if taken else 0.0
    rho_fail = (fails / pool) / (kept_fails / size) if kept_fails else 0.0
    return rho_pass, rho_fail


def balanced_group(
    scores: Sequence[float], size: int, weight: float, rng: random.Random
) -> BalancedGroup | None:
    """Choose a balanced group of `size` from one pool's `scores` (uniformly at random
    within each class) and its corrected advantages under objective weight `weight`;
    None when `balanced_passes` finds no group."""
    passing = [i for i, s in enumerate(scores) if s >= PASS_SCORE]
    failing = [i for i, s in enumerate(scores) if s < PASS_SCORE]
    taken = balanced_passes(len(scores), len(passing), size)
    if taken is None:
        return None
    members = sorted(rng.sample(passing, taken) + rng.sample(failing, size - taken))
    baseline = sum(scores) / len(scores)
    rho_pass, rho_fail = class_ratios(len(scores), len(passing), size, taken)
    ratios = [rho_pass if scores[i] >= PASS_SCORE else rho_fail for i in members]
    advantages = [
        weight * rho * (scores[i] - baseline) for i, rho in zip(members, ratios, strict=True)
    ]
    return BalancedGroup(members=members, advantages=advantages, ratios=ratios, baseline=baseline)


def pool_advantages(scores: Sequence[float], weight: float) -> list[float]:
    """The whole pool's advantages w * (r - b): what a balanced group's corrected update
    equals in expectation."""
    baseline = sum(scores) / len(scores)
    return [weight * (s - baseline) for s in scores]
