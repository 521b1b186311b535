"""`curate allocate`: per-sample rollout counts for a training run, out of a total budget
(parse the options, call `curate.allocation.plan_rollouts`, summarise the plan)."""

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
    from curate.allocation import plan_rollouts
    from curate.errors import UsageError

    if drop_zero_signal and zero_signal not in (ZeroSignal.min, ZeroSignal.drop):
        raise UsageError(f"--drop-zero-signal contradicts --zero-signal {zero_signal.value}")
    plan = plan_rollouts(
        run,
        budget,
        output=output,
        method=method.value,
        min_runs=min_runs,
        max_runs=max_runs,
        zero_signal="drop" if drop_zero_signal else zero_signal.value,
    )
    counts = plan.frame["planned_rollouts"].to_numpy()
    print(
        f"planned {int(counts.sum())} rollouts over {plan.frame.height} samples "
        f"({plan.method}; {counts.min()} to {counts.max()} per sample) -> {output}"
    )
    if plan.at_minimum:
        print(f"  {plan.at_minimum} zero-signal sample(s) at --min-runs {min_runs}")
    if plan.left_out:
        print(f"  {plan.left_out} sample(s) left out (zero signal)")
    print(
        f"  variance proxy sum p~(1-p~)/n: {plan.variance_ratio():.3f}x that of "
        f"{plan.even_share:.1f} per sample"
    )
