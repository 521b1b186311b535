"""`curate allocate`: per-sample rollout counts for a training run, out of a total budget
(parse the options, call `curate.allocation.plan_rollouts`, summarise the plan)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import RunArg

# A panel of its own keeps the long choice lists from squeezing the other help texts.
HOW = "How rollouts are shared"


class Method(StrEnum):
    neyman = "neyman"
    inverse_p = "inverse-p"
    uniform = "uniform"


class ZeroSignal(StrEnum):
    min = "min"
    drop = "drop"
    rate = "rate"


# curate.allocation.DEFAULT_ZERO_SIGNAL (not imported: it would load numpy for --help).
DEFAULT_RULE = ZeroSignal.rate


@handle_errors
def allocate(
    run: RunArg,
    budget: Annotated[
        int,
        typer.Option(
            "--budget",
            "-b",
            metavar="B",
            help="Total rollouts to hand out (the plan sums to it exactly).",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="PLAN",
            help="The plan: .jsonl, .parquet or .csv.",
            show_default=False,
        ),
    ],
    method: Annotated[
        Method,
        typer.Option(
            metavar="METHOD",
            help="neyman: n ~ sqrt(p(1-p)), DynaMO's variance-minimising allocation; "
            "inverse-p: n ~ 1/p, the log objective's weight (Reinforce-Ada); uniform: n "
            "equal. p is the smoothed pass rate.",
            rich_help_panel=HOW,
        ),
    ] = Method.neyman,
    zero_signal: Annotated[
        ZeroSignal | None,
        typer.Option(
            metavar="RULE",
            help="Samples whose outcomes were all the same. rate: like the rest, on their "
            "smoothed pass rate (a short pilot often sees no variance where the true rate "
            "is not 0 or 1; with neyman, rate gave the least gradient variance in every "
            "benchmark); "
            "min: --min-rollouts each; drop: left out "
            f"\\[default: {DEFAULT_RULE.value}].",
            show_default=False,
            rich_help_panel=HOW,
        ),
    ] = None,  # None: not given, so --drop-zero-signal does not contradict it
    drop_zero_signal: Annotated[
        bool,
        # A bare flag: its --no- form would mean nothing but the default.
        typer.Option("--drop-zero-signal", help="Same as --zero-signal drop.", rich_help_panel=HOW),
    ] = False,
    min_rollouts: Annotated[
        int,
        typer.Option(
            "--min-rollouts",
            metavar="N",
            help="Fewest rollouts per sample (--zero-signal min gives them this).",
            rich_help_panel=HOW,
        ),
    ] = 2,
    max_rollouts: Annotated[
        int | None,
        typer.Option(
            "--max-rollouts",
            metavar="N",
            help="Most rollouts per sample \\[default: no limit].",
            show_default=False,
            rich_help_panel=HOW,
        ),
    ] = None,
) -> None:
    """Plan rollouts per sample for training from a run's pass rates.

    Methods: DynaMO's variance-minimising allocation (neyman), Reinforce-Ada's
    inverse-p weight for the log objective, or uniform. The summary compares the
    plan's gradient-variance proxy, sum p(1-p)/n on the smoothed pass rates, with
    spreading the same budget evenly: lower is better.
    """
    from curate.allocation import plan_rollouts
    from curate.errors import UsageError

    if drop_zero_signal and zero_signal not in (None, ZeroSignal.drop):
        raise UsageError(f"--drop-zero-signal contradicts --zero-signal {zero_signal.value}")
    rule = ZeroSignal.drop if drop_zero_signal else (zero_signal or DEFAULT_RULE)
    plan = plan_rollouts(
        run,
        budget,
        output=output,
        method=method.value,
        min_runs=min_rollouts,
        max_runs=max_rollouts,
        zero_signal=rule.value,
    )
    counts = plan.frame["planned_rollouts"].to_numpy()
    print(
        f"planned {int(counts.sum())} rollouts over {plan.frame.height} samples "
        f"({plan.method}; {counts.min()} to {counts.max()} per sample) -> {output}"
    )
    zero = int(plan.frame["zero_signal"].sum())
    if plan.at_minimum:
        print(f"  {plan.at_minimum} zero-signal sample(s) at --min-rollouts {min_rollouts}")
    elif zero:
        binary = bool((plan.frame["reward_std"] == plan.frame["bernoulli_std"]).all())
        basis = "smoothed pass rate" if binary else "shrunk reward spread"
        print(f"  {zero} zero-signal sample(s) allocated on their {basis}")
    if plan.left_out:
        print(f"  {plan.left_out} zero-signal sample(s) left out")
    over = f" over the same {plan.frame.height} samples" if plan.left_out else ""
    print(
        f"  gradient-variance proxy sum sigma^2/n: {plan.variance_ratio():.3f}x of uniform "
        f"allocation{over} at the same budget (lower is better)"
    )
    if plan.method == "inverse-p":
        # It aims at the log objective, not at this proxy: say so before a user reads
        # a figure above 1 as a fault.
        print("  (inverse-p weighs hard samples up for the log objective, not for this proxy)")
