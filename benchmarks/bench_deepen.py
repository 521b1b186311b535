"""`curate eval --deepen K --to M`: how far deepening a random K of the all-same
prompts narrows an undecided multiplier, and what it costs, in one run.

    .venv/bin/python benchmarks/bench_deepen.py [--prompts 4000] [--seeds 3] [--rollouts 8]
                                                [--group-size 8]

For each population where N rollouts leave the multiplier undecided (a block of prompts
at exactly 0, or at 0 and 1, beside a continuous part), SEEDS data sets of PROMPTS
prompts: the run's N rollouts per prompt, then K of its all-same prompts chosen as
`curate eval --deepen` chooses them (`curate.core.deepen.choose`, seeded) and given
rollouts up to M. Through the real `analyze` path (the prior fitted on every rollout,
the per-sample figures on the first N, as `curate report` does on a deepened run),
prints per (K, M): the multiplier's 95% range before and after, the true multiplier
(from the simulated pass rates) and whether the range holds it, whether the interval of
mixed groups at the recommended group size holds its truth, and the extra rollouts
against the baseline of taking M rollouts for every prompt (`-n M`), measured in the
same run. Printed as a Markdown table (docs/concepts/statistics.md shows it).

The test of the same thing through `curate eval` itself is tests/evaluation/test_deepen.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from curate.core.deepen import CORRECT, INCORRECT, choose  # noqa: E402
from curate.stats import analyze  # noqa: E402
from curate.stats.per_sample import aggregate_rollouts  # noqa: E402
from tests.stats.test_stats_populations import (  # noqa: E402
    at,
    beta,
    mixture,
    true_multiplier,
    u,
)
from tests.stats.test_stats_simulation import long_format  # noqa: E402

POPULATIONS = {
    "40% at 0, rest Beta(2,3)": mixture((0.4, at(0.0)), (0.6, beta(2, 3))),
    "60% at 0, rest Beta(1,4)": mixture((0.6, at(0.0)), (0.4, beta(1, 4))),
    "15% at 0, 25% at 1, rest uniform": mixture(
        (0.15, at(0.0)), (0.25, at(1.0)), (0.6, beta(1, 1))
    ),
}
# (K, M): the report's remedy (400 prompts to G x (high + 1) = 72 at G = 8), fewer rollouts
# or prompts, and more prompts.
PLANS = [(100, 32), (400, 32), (400, 72), (1000, 72)]


def one(pop_name: str, seed: int, args: argparse.Namespace) -> list[dict[str, object]]:
    n, g = args.runs, args.group_size
    top = max(m for _, m in PLANS)
    rng = np.random.default_rng(seed)
    p = POPULATIONS[pop_name](rng, args.prompts)
    outcomes = (rng.random((args.prompts, top)) < p[:, None]).astype(float)
    first = long_format(list(outcomes[:, :n]))
    base = analyze(first, group_size=g).summary.compute_multiplier
    ids = [f"s{i:05d}" for i in range(args.prompts)]
    c = outcomes[:, :n].sum(axis=1)
    pools = {
        INCORRECT: [ids[i] for i in np.flatnonzero(c == 0)],
        CORRECT: [ids[i] for i in np.flatnonzero(c == n)],
    }
    truth = true_multiplier(p, g)
    rows = []
    for k, m in PLANS:
        chosen = {sid for group in choose(pools, k, seed).values() for sid in group}
        every = long_format(
            [row[:m] if sid in chosen else row[:n] for sid, row in zip(ids, outcomes, strict=True)]
        )
        after = analyze(
            first, group_size=g, prior_aggregate=aggregate_rollouts(every)
        ).summary.compute_multiplier
        rng_after = after.recommended_range or {"low": after.recommended, "high": after.recommended}
        share = float(np.mean(u(p, after.recommended_group_size)))
        box = after.recommended_open_interval
        extra = len(chosen) * (m - n)
        rows.append(
            {
                "population": pop_name,
                "seed": seed,
                "plan": f"--deepen {k} --to {m}",
                "all_same": len(pools[INCORRECT]) + len(pools[CORRECT]),
                "before": base.recommended_range,
                "after": rng_after,
                "truth": truth,
                "holds": rng_after["low"] <= truth <= rng_after["high"],
                "share_holds": box is None or box["low"] <= share <= box["high"],
                "extra": extra,
                "baseline": args.prompts * (m - n),
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rollouts", dest="runs", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    args = parser.parse_args()

    print(
        "| population | deepen | all-same prompts | multiplier 95% before | after | truth "
        "| range holds truth | mixed-share interval holds truth | extra rollouts | vs -n M |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for pop_name in POPULATIONS:
        for seed in range(args.seeds):
            for r in one(pop_name, seed, args):
                b, a = r["before"], r["after"]
                before = f"{b['low']}x-{b['high']}x" if b else "decided"  # type: ignore[index]
                after = f"{a['low']}x-{a['high']}x"  # type: ignore[index]
                ratio = r["extra"] / r["baseline"]  # type: ignore[operator]
                ok = ok and bool(r["holds"]) and bool(r["share_holds"])
                print(
                    f"| {pop_name} (seed {r['seed']}) | `{r['plan']}` | {r['all_same']:,} | "
                    f"{before} | {after} | {r['truth']}x | {'yes' if r['holds'] else 'NO'} | "
                    f"{'yes' if r['share_holds'] else 'NO'} | {r['extra']:,} | {ratio:.1%} |"
                )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
