"""Benchmark: `curate allocate` against uniform allocation at the same budget.

A population with known pass rates gets a pilot run of N rollouts per sample;
`curate.allocation.allocate` plans a training budget of B = k * samples from the
pilot (smoothed pass rates), for each method and each --zero-signal rule. The
yardstick is DynaMO's gradient-variance proxy on the TRUE rates (lower is better):

    V(n) = sum_i sigma_i^2 / n_i,   sigma_i^2 = p_i (1 - p_i)

printed as V(plan) / V(uniform), uniform being k rollouts for every sample. The
oracle line is Neyman on the true rates without bounds (the floor).

Populations (--population):
    beta   p ~ Beta(a, b) (--beta; default 2 14: skewed to hard prompts)
    tiny   shaped like tiny-math on sample_data/arithmetic.jsonl measured with 256
           rollouts per sample: 19% never solved, 27% hard, 14% middling, 40% easy
           but rarely certain
    split  a third exactly 0, a third exactly 1, a third uniform in [0.1, 0.9]: the
           case where a closed gate in the pilot really means sigma = 0 (min's best)
Real runs: --rollouts PILOT TRUTH plans from the run PILOT and scores the plan on the
pass rates of TRUTH (the same samples with many more rollouts, e.g. another seed).

    python benchmarks/bench_allocate.py [--population beta|tiny|split] [--samples 20000]
        [--pilot 8] [--per-sample 8] [--beta 2 14] [--rollouts PILOT TRUTH] [--no-check]

Bar: neyman's ratio below 1 with the default rule, --zero-signal rate.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.prior import Prior

# What a pilot gives the planner: its per-sample statistics, the true rates in the same
# order, the fitted prior, and a line saying what was measured.
Pilot = tuple["pl.DataFrame", np.ndarray, "Prior", str]

RULES = ("min", "rate", "drop")
METHODS = ("neyman", "inverse-p", "uniform")


def population(
    name: str, size: int, beta: tuple[float, float], rng: np.random.Generator
) -> np.ndarray:
    """True pass rates for `size` samples (see the module docstring)."""
    if name == "beta":
        return rng.beta(beta[0], beta[1], size)
    if name == "split":
        third = rng.integers(0, 3, size)
        return np.where(third == 0, 0.0, np.where(third == 1, 1.0, rng.uniform(0.1, 0.9, size)))
    if name == "tiny":
        kind = rng.choice(4, size, p=[0.19, 0.27, 0.14, 0.40])
        return np.select(
            [kind == 0, kind == 1, kind == 2],
            [0.0, rng.beta(1.0, 10.0, size), rng.uniform(0.2, 0.8, size)],
            rng.beta(40.0, 1.5, size),
        )
    raise SystemExit(f"unknown population {name!r}")


def simulated(args: argparse.Namespace) -> Pilot:
    """(per-sample statistics of a simulated pilot, true rates, prior, description)."""
    import polars as pl

    from curate.stats.analysis import analyze

    rng = np.random.default_rng(args.seed)
    size, pilot = args.samples, args.pilot
    p = population(args.population, size, (args.beta[0], args.beta[1]), rng)
    outcomes = (rng.random((size, pilot)) < p[:, None]).astype(float)
    ids = [f"s{i:06d}" for i in range(size)]
    rollouts = pl.DataFrame(
        {
            "sample_id": np.repeat(ids, pilot),
            "rollout_idx": np.tile(np.arange(pilot), size).astype(np.int32),
            "score": outcomes.ravel(),
            "error": pl.Series([None] * (size * pilot), dtype=pl.String),
        }
    )
    analysis = analyze(rollouts)
    per_sample = analysis.per_sample.sort("sample_id")  # the order of `ids`, and of p
    name = args.population
    if name == "beta":
        name = f"Beta({args.beta[0]:g}, {args.beta[1]:g})"
    described = f"{size} samples, population {name}, pilot {pilot} rollouts each"
    return per_sample, p, analysis.prior, described


def from_runs(pilot: str, truth: str) -> Pilot:
    """The pilot run's statistics, and the truth run's pass rates in the same order."""
    import polars as pl

    from curate.analysis import load_analysis

    planned = load_analysis(pilot)
    measured = load_analysis(truth).per_sample.select(
        "sample_id", pl.col("pass_rate").alias("_true"), pl.col("n_rollouts").alias("_n")
    )
    joined = planned.per_sample.sort("sample_id").join(measured, on="sample_id", how="inner")
    if joined["_true"].null_count():
        raise SystemExit("the truth run has samples without a scored rollout")
    per_sample = joined.drop("_true", "_n")
    most, least = planned.per_sample["n_rollouts"].max(), joined["_n"].min()
    described = (
        f"{joined.height} samples of {pilot} (pilot: up to {most!s} rollouts each), "
        f"true rates from {truth} ({least!s} or more rollouts each)"
    )
    return per_sample, joined["_true"].to_numpy(), planned.prior, described


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", choices=("beta", "tiny", "split"), default="beta")
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--pilot", type=int, default=8, help="pilot rollouts per sample")
    parser.add_argument("--per-sample", type=int, default=8, help="budget B = this x samples")
    parser.add_argument("--beta", type=float, nargs=2, default=(2.0, 14.0), metavar=("A", "B"))
    parser.add_argument("--runs", nargs=2, metavar=("PILOT", "TRUTH"), help="real runs")
    parser.add_argument("--min-rollouts", dest="min_runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    from curate.allocation import DEFAULT_ZERO_SIGNAL, allocate, variance_proxy

    if args.runs:
        per_sample, p, prior, described = from_runs(*args.runs)
    else:
        per_sample, p, prior, described = simulated(args)
    size = per_sample.height
    sigma2 = p * (1 - p)
    order = {sid: i for i, sid in enumerate(per_sample["sample_id"].to_list())}
    budget = args.per_sample * size
    uniform = variance_proxy(sigma2, np.full(size, args.per_sample))
    print(f"{described}; budget {budget} = {args.per_sample} per sample")
    zero = int((per_sample["variance"] == 0).sum())
    print(
        f"zero-signal in the pilot (all outcomes the same): {zero} ({zero / size:.1%}); "
        f"true rate exactly 0 or 1: {int((sigma2 == 0).sum())}"
    )
    print(f"V(plan) / V(uniform {args.per_sample} each) on the true rates, lower is better:")
    print(f"{'method':>10}" + "".join(f"  {'--zero-signal ' + rule:>19}" for rule in RULES))
    ratios: dict[tuple[str, str], float] = {}
    for method in METHODS:
        cells = []
        for rule in RULES:
            plan = allocate(
                per_sample,
                budget,
                method=method,
                min_runs=args.min_runs,
                zero_signal=rule,
                prior=prior,
            )
            counts = np.zeros(size, dtype=np.int64)  # a dropped sample gets n = 0
            for sid, n in plan.select("sample_id", "planned_rollouts").iter_rows():
                counts[order[sid]] = n
            assert counts.sum() == budget
            ratios[(method, rule)] = variance_proxy(sigma2, counts) / uniform
            cells.append(f"{ratios[(method, rule)]:.3f} ({counts.min()}..{counts.max()})")
        print(f"{method:>10}" + "".join(f"  {cell:>19}" for cell in cells))
    print(
        "  (drop: inf when a left-out sample's true rate is not 0 or 1, as it has n = 0; "
        f"min pins zero-signal samples at --min-rollouts {args.min_runs})"
    )
    oracle = np.sqrt(sigma2)
    oracle_n = budget * oracle / max(oracle.sum(), 1e-300)
    print(
        f"{'oracle':>10}: V / V(uniform) = {variance_proxy(sigma2, oracle_n) / uniform:.3f}  "
        "(Neyman on the true rates, continuous, no bounds)"
    )
    if ratios[("neyman", DEFAULT_ZERO_SIGNAL)] >= 1.0 and not args.no_check:
        print(
            f"FAIL: neyman with --zero-signal {DEFAULT_ZERO_SIGNAL} does not beat uniform",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
