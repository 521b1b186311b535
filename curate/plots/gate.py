"""Expected share of samples whose training group is mixed (rewards not all equal),
against group size."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from curate.errors import InputError
from curate.plots._common import (
    BEST_COLOR,
    CATEGORY_STRONG,
    drop_unscored,
    new_figure,
    no_data_figure,
    require_columns,
)
from curate.stats.mixed import mixed_label

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

_CURVE_COLOR = CATEGORY_STRONG["high_variance"]
_MARK_COLOR = BEST_COLOR


def gate_figure(
    gate_curve: pl.DataFrame,
    *,
    group_size: int | None = None,
    title: str | None = None,
) -> Figure:
    """`expected_open_fraction` against `group_size` (log2 x axis), marking `group_size`.

    A group whose rewards are all equal (all pass, all fail, or the same partial credit)
    gives a group-relative advantage of zero: the "gate" is shut. The curve shows how many
    samples can be expected to carry signal for each group size; the marked point is the
    group size the user trains with, labelled as `curate report` labels it. `plot_run`
    puts that size on the curve; one between two curve points is read off by
    interpolating in log2 space. Optional `interval_low` and `interval_high` columns
    (`gate_curve(..., intervals=True)`: null where the rollouts observe the point) are
    shaded as the 95% interval of the points past the rollouts taken.
    """
    import numpy as np
    import polars as pl

    require_columns(gate_curve, ("group_size", "expected_open_fraction"), "gate_curve")
    if group_size is not None and group_size < 1:
        raise InputError(f"group size must be at least 1, got {group_size}")
    title = title if title is not None else "Expected share of samples with learning signal"
    curve = (
        drop_unscored(gate_curve, ("group_size", "expected_open_fraction"))
        .filter(pl.col("group_size") >= 1)
        .unique("group_size", keep="first")
        .sort("group_size")
    )
    if curve.height == 0:
        return no_data_figure("no gate curve to plot", title=title)
    sizes = curve["group_size"].cast(pl.Float64).to_numpy()
    fractions = curve["expected_open_fraction"].cast(pl.Float64).to_numpy()

    fig = new_figure(8.0, 4.8)
    ax = fig.add_subplot()
    # Markers only at powers of two: 64 markers crowd together at the right of a log axis.
    powers = np.isclose(np.log2(sizes) % 1.0, 0.0)
    (line,) = ax.plot(
        sizes,
        fractions,
        color=_CURVE_COLOR,
        linewidth=2.0,
        marker="o",
        markersize=4,
        markevery=list(np.flatnonzero(powers)) if powers.any() else None,
        label="expected share of samples whose group is mixed (rewards not all equal)",
        zorder=3,
    )
    ax.fill_between(sizes, 0.0, fractions, color=_CURVE_COLOR, alpha=0.12, linewidth=0)
    handles = [line]
    if "interval_low" in curve.columns and "interval_high" in curve.columns:
        band = _interval_band(ax, curve, sizes)
        if band is not None:
            handles.append(band)
    if group_size is not None:
        handles.append(_mark_group_size(ax, sizes, fractions, group_size))

    _style_axes(ax, sizes, group_size)
    fig.legend(handles=handles, loc="outside lower center", ncol=1, fontsize=8, frameon=False)
    fig.suptitle(title)
    return fig


def _interval_band(ax: Axes, curve: pl.DataFrame, sizes: np.ndarray) -> Any:
    """Shade the 95% interval where the curve has one; None when it has none."""
    import numpy as np
    import polars as pl

    low = curve["interval_low"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    high = curve["interval_high"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    has = ~np.isnan(low) & ~np.isnan(high)
    if not has.any():
        return None
    return ax.fill_between(
        sizes,
        np.where(has, low, np.nan),
        np.where(has, high, np.nan),
        where=has,
        color=_CURVE_COLOR,
        alpha=0.3,
        linewidth=0,
        label="95% interval past the rollouts taken (what the data cannot pin down)",
        zorder=2,
    )


def _value_at(sizes: np.ndarray, fractions: np.ndarray, group_size: int) -> float | None:
    """The curve at `group_size`: exact, log2-interpolated, or None outside the curve."""
    import numpy as np

    if group_size < sizes[0] or group_size > sizes[-1]:
        return None
    return float(np.interp(math.log2(group_size), np.log2(sizes), fractions))


def _mark_group_size(ax: Axes, sizes: np.ndarray, fractions: np.ndarray, group_size: int) -> Line2D:
    """A dashed vertical rule at `group_size`, a dot on the curve and its value as text."""
    value = _value_at(sizes, fractions, group_size)
    rule = ax.axvline(
        group_size,
        color=_MARK_COLOR,
        linestyle="--",
        linewidth=1.2,
        zorder=4,
        label=f"current group size: {group_size}",
    )
    if value is None:
        rule.set_label(f"current group size: {group_size} (outside the curve)")
        return rule
    ax.plot([group_size], [value], "o", color=_MARK_COLOR, markersize=7, zorder=5)
    # Put the text on the open side of the point: right of it unless near the right edge,
    # below it (the curve rises left to right) unless the point is already near the bottom.
    lo, hi = math.log2(sizes[0]), math.log2(sizes[-1])
    x_share = (math.log2(group_size) - lo) / (hi - lo) if hi > lo else 0.5
    dx = 12 if x_share < 0.6 else -12
    dy = -28 if value > 0.3 else 22
    ax.annotate(
        f"{mixed_label(group_size)}: {value:.1%}\n(expected share of samples)",
        xy=(group_size, value),
        xytext=(dx, dy),
        textcoords="offset points",
        ha="left" if dx > 0 else "right",
        va="top" if dy < 0 else "bottom",
        fontsize=9,
        bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "#bbbbbb"},
        arrowprops={"arrowstyle": "-", "color": "#888888", "linewidth": 0.8},
        zorder=6,
    )
    return rule


def _style_axes(ax: Axes, sizes: np.ndarray, group_size: int | None) -> None:
    """Log2 x axis with plain integer ticks at powers of two, y as a percentage."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

    lo, hi = float(sizes[0]), float(sizes[-1])
    if group_size is not None:
        lo, hi = min(lo, group_size), max(hi, group_size)
    ax.set_xscale("log", base=2)
    if hi > lo:
        ax.set_xlim(lo / 1.15, hi * 1.15)
    else:
        ax.set_xlim(lo / 2, lo * 2)  # a single point still needs a visible axis around it
    exponents = range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)
    step = max(1, math.ceil(len(exponents) / 13))  # thin out so labels like 65,536 never touch
    ticks = [2.0**k for k in exponents[::step]]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(0.0, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("group size (rollouts per prompt in one training step)")
    ax.set_ylabel("samples with a mixed group")
    ax.grid(color="#e3e3e3", linewidth=0.6)
    ax.set_axisbelow(True)
