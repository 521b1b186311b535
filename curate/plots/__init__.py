"""Plots of per-sample statistics: variance, pass-rate histogram, gate-open curve;
`plot_run` draws one of them for a run or score table (what `curate plot` calls).

Importing this package does not import matplotlib (the figure functions do, when called),
so the CLI can use `PLOT_KINDS` without slowing down `curate --help`.
"""

from __future__ import annotations

from curate.plots.gate import gate_figure
from curate.plots.histogram import histogram_figure
from curate.plots.length import length_figure
from curate.plots.run import default_plot_path, plot_run
from curate.plots.save import save_figure
from curate.plots.variance import variance_figure

PLOT_KINDS: tuple[str, ...] = ("variance", "histogram", "gate", "length", "reflective")

__all__ = [
    "PLOT_KINDS",
    "default_plot_path",
    "gate_figure",
    "histogram_figure",
    "length_figure",
    "plot_run",
    "save_figure",
    "variance_figure",
]
