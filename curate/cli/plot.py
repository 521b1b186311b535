"""`curate plot`: the variance plot, the pass-rate histogram, and the gate curve
(parse the options, call `curate.plots.plot_run`, say where the plot went)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt
from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD


class PlotKind(str, Enum):
    variance = "variance"
    histogram = "histogram"
    gate = "gate"
    length = "length"
    reflective = "reflective"


@handle_errors
def plot(
    run: RunArg,
    sample: Annotated[
        str | None,
        typer.Argument(
            help="The sample --kind reflective draws (a --grader r3 run).", show_default=False
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Output file: .png, .svg or .pdf.", show_default=False),
    ] = None,
    kind: Annotated[PlotKind, typer.Option("--kind", "-k", help="Which plot.")] = PlotKind.variance,
    threshold: ThresholdOpt = DEFAULT_THRESHOLD,
    group_size: GroupSizeOpt = DEFAULT_GROUP_SIZE,
) -> None:
    """Draw the variance plot, a pass-rate histogram, mixed-group odds against G, lengths,
    or an r3 run's reflective tokens of one SAMPLE."""
    from curate.plots.run import plot_run

    path = plot_run(
        run,
        kind=kind.value,
        output=output,
        threshold=threshold,
        group_size=group_size,
        sample=sample,
    )
    print(f"wrote {path}")
