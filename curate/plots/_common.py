"""Shared pieces of the plot modules: category names/colours, column checks, figure factory.

Nothing here imports matplotlib, numpy or polars at module level: `curate --help` imports
`curate.plots` (for `PLOT_KINDS`) and must stay fast, so heavy imports happen inside functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from curate.core.outcome import LABELS, SHORT_LABELS
from curate.errors import InputError

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.figure import Figure

# Left-to-right order of the bands in the variance plot: wrong -> mixed -> right reads like a
# sorted pass-rate curve, and the two mixed bands (the learnable prompts) sit together.
CATEGORY_ORDER: tuple[str, ...] = (
    "always_incorrect",
    "low_variance",
    "high_variance",
    "always_correct",
)

# What the bands and legends say: the one vocabulary of `curate.core.outcome`.
CATEGORY_LABELS: dict[str, str] = LABELS
# Short names for in-plot band labels, which must fit into narrow bands.
CATEGORY_SHORT: dict[str, str] = SHORT_LABELS

# Light background colours for bands; kept pale and away from blue/red so that the blue
# mean/std marks and the red best-score marks stay the most visible things on the plot.
CATEGORY_COLORS: dict[str, str] = {
    "always_incorrect": "#bdbdbd",
    "low_variance": "#fdd49e",
    "high_variance": "#a1d99b",
    "always_correct": "#bcbddc",
    "other": "#f0f0f0",
}

# Strong versions of the same hues, for bars that must stand out (the 0 and 1 spikes).
CATEGORY_STRONG: dict[str, str] = {
    "always_incorrect": "#636363",
    "low_variance": "#e6550d",
    "high_variance": "#31a354",
    "always_correct": "#756bb1",
}

MEAN_COLOR = "#1f77b4"
MEAN_DARK = "#08306b"
BEST_COLOR = "#d62728"


def new_figure(width: float, height: float) -> Figure:
    """A stand-alone Figure on an Agg canvas (no pyplot state, nothing to leak)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def require_columns(frame: pl.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise InputError naming the columns `frame` lacks (the caller's table is malformed)."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        raise InputError(f"{what} table is missing column(s) {names}")


def drop_unscored(frame: pl.DataFrame, columns: Iterable[str]) -> pl.DataFrame:
    """Rows whose `columns` are all present and finite.

    Samples with zero scored rollouts carry nulls (or NaN) in the float columns; they have
    no score to plot, so they are skipped rather than drawn at 0.
    """
    import polars as pl

    keep = pl.lit(True)
    for name in columns:
        col = pl.col(name).cast(pl.Float64)
        keep = keep & col.is_not_null() & col.is_finite()
    return frame.filter(keep)


def no_data_figure(message: str, *, title: str | None, width: float = 8.0) -> Figure:
    """A figure that says why there is nothing to draw, instead of an empty or broken plot."""
    fig = new_figure(width, 3.0)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, color="#555555")
    if title:
        fig.suptitle(title)
    return fig


def share(count: int, total: int) -> str:
    """`count` as a percentage of `total`, for labels ("12.5%")."""
    return f"{100.0 * count / total:.1f}%" if total else "0.0%"
