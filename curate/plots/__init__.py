"""Plots of per-sample statistics: variance, pass-rate histogram, gate-open curve.

Importing this package does not import matplotlib (the figure functions do, when called),
so the CLI can use `PLOT_KINDS` without slowing down `curate --help`.
"""

from __future__ import annotations

from curate.plots.gate import gate_figure
from curate.plots.histogram import histogram_figure
from curate.plots.save import save_figure
from curate.plots.variance import variance_figure

PLOT_KINDS: tuple[str, ...] = ("variance", "histogram", "gate")

__all__ = ["PLOT_KINDS", "gate_figure", "histogram_figure", "save_figure", "variance_figure"]
