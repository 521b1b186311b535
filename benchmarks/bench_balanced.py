"""Benchmark: does a balanced group carry the pool's update? (`curate export --as balanced`)

Each prompt is a softmax policy over a few distinct completions (half right, half wrong)
whose pass rate p comes from a population; a pool of N rollouts is drawn from it, and
balanced groups of n are drawn from the pool by `curate.stats.balanced.balanced_group`
(the exporter's own function). For each prompt the figure is the update's component
along the true gradient of p, in units of it: the weight the update puts on the prompt.
The baseline is the whole pool's update, w(p~) * mean (r - b) grad log pi. Printed per
population and objective, as a share of the pool's mean weight (with its standard error):

    corrected    w * rho * (r - b), rho = the class's pool share / group share
    uncorrected  w * (r - b) on the balanced group (the objective weight alone)

    python benchmarks/bench_balanced.py [--prompts 2000] [--pool 32] [--group 8]
        [--draws 100] [--seed 0]

Bar: every corrected bias within 4 standard errors of 0.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

import numpy as np

from curate.stats.balanced import balanced_group, balanced_passes, pool_advantages
from curate.stats.weights import objective_weight

COMPLETIONS = 6

POPULATIONS: dict[str, Callable[[np.random.Generator], float]] = {
    "point masses 0.08/0.8": lambda g: float(g.choice([0.08, 0.8], p=[0.6, 0.4])),
    "bimodal 0.06/0.9": lambda g: float(
        np.clip(g.normal(0.06, 0.02) if g.random() < 0.7 else g.normal(0.9, 0.03), 0.01, 0.99)
    ),
    "Beta(0.7, 2.5)": lambda g: float(np.clip(g.beta(0.7, 2.5), 0.01, 0.99)),
}


def simulate(
    draw_p: Callable[[np.random.Generator], float],
    objective: str,
    args: argparse.Namespace,
) -> tuple[float, float, float, float, int]:
    """(corrected bias, its se, uncorrected bias, its se) as shares of the pool's mean
    weight, and the number of prompts that gave a group."""
    rng = np.random.default_rng(args.seed)
    pick = random.Random(args.seed)
    gaps_c, gaps_u, targets = [], [], []
    half = COMPLETIONS // 2
    rewards = np.array([1.0] * half + [0.0] * half)
    for _ in range(args.prompts):
        p = draw_p(rng)
        probs = np.concatenate(
            [p * rng.dirichlet(np.ones(half)), (1 - p) * rng.dirichlet(np.ones(half))]
        )
        grads = np.eye(COMPLETIONS) - probs
        true = (probs * rewards) @ grads
        pool = rng.choice(COMPLETIONS, size=args.pool, p=probs)
        scores = [float(rewards[a]) for a in pool]
        passes = int(sum(scores))
        if balanced_passes(args.pool, passes, args.group) is None:
            continue
        w = objective_weight(min(max(passes / args.pool, 0.05), 0.95), objective)
        target = float(np.array(pool_advantages(scores, w)) @ grads[pool] @ true) / args.pool
        b = sum(scores) / args.pool
        c, u = [], []
        for _ in range(args.draws):
            group = balanced_group(scores, args.group, w, pick)
            assert group is not None
            rows = grads[pool[group.members]] @ true
            c.append(float(np.array(group.advantages) @ rows) / args.group)
            plain = np.array([w * (scores[i] - b) for i in group.members])
            u.append(float(plain @ rows) / args.group)
        norm = float(true @ true)
        targets.append(target / norm)
        gaps_c.append((np.mean(c) - target) / norm)
        gaps_u.append((np.mean(u) - target) / norm)
    scale = float(np.mean(targets))
    n = len(targets)
    gc, gu = np.array(gaps_c) / scale, np.array(gaps_u) / scale
    se = lambda x: float(x.std(ddof=1) / np.sqrt(len(x)))  # noqa: E731
    return float(gc.mean()), se(gc), float(gu.mean()), se(gu), n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--pool", type=int, default=32)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"pool N={args.pool}, group n={args.group}, {args.draws} groups per pool")
    print(f"{'population':<24}{'objective':<10}{'prompts':>8}{'corrected':>20}{'uncorrected':>20}")
    ok = True
    for name, draw_p in POPULATIONS.items():
        for objective in ("linear", "log", "arcsin"):
            c, c_se, u, u_se, n = simulate(draw_p, objective, args)
            ok &= abs(c) < 4 * c_se + 1e-12
            print(
                f"{name:<24}{objective:<10}{n:>8}{c:>+12.2%} ±{c_se:>6.2%}{u:>+12.2%} ±{u_se:>6.2%}"
            )
    print("bias as a share of the pool's mean weight on the true gradient (± standard error)")
    print("bar: corrected within 4 standard errors of 0:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
