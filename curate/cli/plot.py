"""`curate plot`: the variance plot, the pass-rate histogram, and the gate curve."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt


class PlotKind(str, Enum):
    variance = "variance"
    histogram = "histogram"
    gate = "gate"


def default_plot_path(run: Path, kind: str) -> Path:
    """RUN/plots/KIND.png for a run directory, else TABLE.KIND.png beside the table."""
    if run.is_dir():
        return run / "plots" / f"{kind}.png"
    return run.with_name(f"{run.stem}.{kind}.png")


@handle_errors
def plot(
    run: RunArg,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Output file: .png, .svg or .pdf.", show_default=False),
    ] = None,
    kind: Annotated[PlotKind, typer.Option("--kind", "-k", help="Which plot.")] = PlotKind.variance,
    threshold: ThresholdOpt = 0.01,
    group_size: GroupSizeOpt = 8,
) -> None:
    """Draw seed 004's variance plot, a pass-rate histogram, or mixed-group odds against G."""
    from curate.plots import gate_figure, histogram_figure, save_figure, variance_figure
    from curate.stats.analysis import analyze
    from curate.stats.dataset import gate_curve
    from curate.store.scores import load_scores

    target = output or default_plot_path(run, kind.value)
    source = load_scores(run)
    analysis = analyze(source.rollouts, threshold=threshold, group_size=group_size)
    if kind is PlotKind.variance:
        fig = variance_figure(
            analysis.per_sample, title=f"Baseline variance: {run.name}", threshold=threshold
        )
    elif kind is PlotKind.histogram:
        fig = histogram_figure(analysis.per_sample)
    else:
        sizes = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
        curve = gate_curve(analysis.per_sample, analysis.prior, sizes, binary=analysis.binary)
        fig = gate_figure(curve, group_size=group_size)
    if output is None and run.is_dir():
        # Only now: bad input must not leave a new plots/ directory behind.
        target.parent.mkdir(exist_ok=True)
    path = save_figure(fig, target)
    print(f"wrote {path}")
