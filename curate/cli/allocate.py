"""`curate allocate`: per-sample rollout counts for a training run, out of a total budget."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import RunArg


class Method(StrEnum):
    neyman = "neyman"
    inverse_p = "inverse-p"
    uniform = "uniform"


class ZeroSignal(StrEnum):
    min = "min"
    drop = "drop"
    rate = "rate"


@handle_errors
def allocate(
    run: RunArg,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            "-b",
            help="Total rollouts to hand out (the plan sums to it exactly).",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="The plan: .jsonl, .parquet or .csv.", show_default=False
        ),
    ],
    method: Annotated[
        Method,
        typer.Option(
            help="neyman: n ~ sqrt(p(1-p)), least gradient variance; inverse-p: n ~ 1/p, "
            "the log objective; uniform: n equal (p is the smoothed pass rate)."
        ),
    ] = Method.neyman,
    min_runs: Annotated[
        int, typer.Option(help="Fewest rollouts per sample (zero-signal samples get this).")
    ] = 2,
    max_runs: Annotated[
        int | None,
        typer.Option(help="Most rollouts per sample (default: no limit).", show_default=False),
    ] = None,
    zero_signal: Annotated[
        ZeroSignal,
        typer.Option(
            help="Samples whose outcomes were all the same: min gives them --min-runs, drop "
            "leaves them out, rate allocates them like the rest on their smoothed pass rate "
            "(the least gradient variance when their true rate is not 0 or 1).",
        ),
    ] = ZeroSignal.min,
    drop_zero_signal: Annotated[bool, typer.Option(help="Same as --zero-signal drop.")] = False,
) -> None:
    """Plan rollouts per sample for training from a run's pass rates (seeds 002 and 003)."""
    import numpy as np

    from curate.allocation import allocate as make_plan
    from curate.allocation import variance_proxy
    from curate.errors import UsageError
    from curate.stats.analysis import analyze
    from curate.store.scores import load_scores
    from curate.store.tables import table_format, write_table

    table_format(output)  # an unknown suffix fails before any work
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 (got {budget})")
    if min_runs < 0:
        raise UsageError(f"--min-runs must be at least 0 (got {min_runs})")
    if drop_zero_signal and zero_signal not in (ZeroSignal.min, ZeroSignal.drop):
        raise UsageError(f"--drop-zero-signal contradicts --zero-signal {zero_signal.value}")
    rule = "drop" if drop_zero_signal else zero_signal.value
    source = load_scores(run)
    analysis = analyze(source.rollouts)
    plan = make_plan(
        analysis.per_sample,
        budget,
        method=method.value,
        min_runs=min_runs,
        max_runs=max_runs,
        zero_signal=rule,
        prior=analysis.prior,
    )
    write_table(plan, output)
    counts = plan["planned_rollouts"].to_numpy()
    zero = int(plan["zero_signal"].sum()) if rule == "min" else 0
    dropped = analysis.per_sample.height - plan.height
    print(
        f"planned {int(counts.sum())} rollouts over {plan.height} samples "
        f"({method.value}; {counts.min()} to {counts.max()} per sample) -> {output}"
    )
    if zero:
        print(f"  {zero} zero-signal sample(s) at --min-runs {min_runs}")
    if dropped:
        print(f"  {dropped} sample(s) left out (zero signal)")
    # The yardstick of seed 003, on the smoothed rates: how much the plan cuts the
    # gradient-estimate variance against spreading the same budget evenly.
    sigma2 = (plan["bernoulli_std"] ** 2).to_numpy()
    even = budget / plan.height
    ratio = variance_proxy(sigma2, counts) / max(
        variance_proxy(sigma2, np.full(plan.height, even)), 1e-300
    )
    print(f"  variance proxy sum p~(1-p~)/n: {ratio:.3f}x that of {even:.1f} per sample")
