"""What the rollout formats share: a seeded draw per prompt."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from curate.core.seeds import derive_seed

T = TypeVar("T")


def rng_for(seed: int, kind: str, sample_id: str) -> random.Random:
    """The random draw of one prompt in one format: the same seed gives the same rows,
    whatever other prompts the run holds."""
    return random.Random(derive_seed(seed, f"{kind}\x1f{sample_id}", 0))


def draw(items: Sequence[T], k: int | None, rng: random.Random) -> list[T]:
    """`k` of `items` uniformly at random, in their original order (all when k is None
    or at least their number)."""
    if k is None or k >= len(items):
        return list(items)
    chosen = sorted(rng.sample(range(len(items)), k))
    return [items[i] for i in chosen]
