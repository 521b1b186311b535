"""`groups` and `balanced`: offline groups for GRPO-style trainers, one row per prompt.

`groups`: the prompt's whole pool, or a uniform draw of `group_size` of it (a pool
smaller than that is left out), with each completion's reward and the group's weight:
the chosen objective's w = f'(p) (`curate.stats.weights`) on the smoothed pass rate,
clipped to [delta, 1 - delta] and scaled to mean 1 over the groups written, the number
`curate filter --weights` gives the same prompt. A uniform draw keeps the pool's mix of
outcomes, so w is the whole correction.

`balanced`: a group of `group_size` with as even a split of right and wrong as the pool
allows (Reinforce-Ada's balanced downsampling, arXiv 2510.04996), and each completion's
corrected advantage w * rho * (r - b) (`curate.stats.balanced`): b the pool's mean
reward, rho the class's importance ratio (its share of the pool over its share of the
group). Pools with one outcome only, or fewer rollouts than the group, are left out.

Every row: prompt, completions, rewards, rollout_idx (per completion), sample_id,
pool_size, pool_passes, pool_pass_rate (K/N), smoothed_pass_rate, weight; balanced adds
advantages, importance and baseline. Completions are text in both styles.
"""

from __future__ import annotations

from typing import Any

from curate.exports.rollouts.pool import Pool
from curate.exports.rollouts.shared import draw, rng_for
from curate.stats.balanced import balanced_group, balanced_passes
from curate.stats.weights import objective_weights


def eligible(pools: list[Pool], kind: str, group_size: int | None) -> tuple[list[Pool], int]:
    """(pools that give a group, how many do not)."""
    if kind == "balanced":
        assert group_size is not None
        keep = [p for p in pools if balanced_passes(p.size, p.passes, group_size) is not None]
    else:
        keep = [p for p in pools if group_size is None or p.size >= group_size]
    return keep, len(pools) - len(keep)


def _head(pool: Pool, weight: float) -> dict[str, Any]:
    return {
        "sample_id": pool.sample_id,
        "pool_size": pool.size,
        "pool_passes": pool.passes,
        "pool_pass_rate": pool.pass_rate,
        "smoothed_pass_rate": pool.smoothed_pass_rate,
        "weight": weight,
    }


def records(
    pools: list[Pool],
    kind: str,
    *,
    group_size: int | None,
    objective: str,
    delta: float,
    seed: int,
) -> list[dict[str, Any]]:
    """One row per eligible pool (see the module docstring)."""
    weights = objective_weights([p.smoothed_pass_rate for p in pools], objective, delta)
    rows = []
    for pool, w in zip(pools, weights, strict=True):
        assert w is not None
        rng = rng_for(seed, kind, pool.sample_id)
        if kind == "balanced":
            assert group_size is not None
            group = balanced_group(pool.scores, group_size, w, rng)
            assert group is not None  # `eligible` kept only pools that give one
            members = [pool.rollouts[i] for i in group.members]
            extra: dict[str, Any] = {
                "advantages": group.advantages,
                "importance": group.ratios,
                "baseline": group.baseline,
            }
        else:
            members = draw(pool.rollouts, group_size, rng)
            extra = {}
        rows.append(
            {
                "prompt": pool.prompt,
                "completions": [r.text for r in members],
                "rewards": [r.score for r in members],
                "rollout_idx": [r.rollout_idx for r in members],
                **_head(pool, w),
                **extra,
            }
        )
    return rows
