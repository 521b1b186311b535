"""Histogram of per-sample pass rate, with the 0 and 1 spikes drawn as separate bars."""

from __future__ import annotations

from typing import TYPE_CHECKING

from curate.core.outcome import LABELS
from curate.errors import InputError
from curate.plots._common import (
    CATEGORY_STRONG,
    MEAN_COLOR,
    drop_unscored,
    new_figure,
    no_data_figure,
    require_columns,
    share,
)

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure

COLUMNS: dict[str, str] = {
    "pass_rate": "pass rate",
    "mean_score": "mean score",
    "smoothed_pass_rate": "smoothed pass rate",
}
# Values closer than this to 0 or 1 count as exactly 0 or 1 (float noise from s / n).
_EPS = 1e-9
# Spike bars sit outside [0, 1], this wide and this far from the interior bars.
_SPIKE_WIDTH = 0.06
_SPIKE_GAP = 0.035
# Centres of the 0 and 1 spike bars, which also carry the '= 0' and '= 1' ticks.
_ZERO_X = -_SPIKE_GAP - _SPIKE_WIDTH / 2
_ONE_X = 1 + _SPIKE_GAP + _SPIKE_WIDTH / 2
# With at most this many distinct values strictly between 0 and 1 (e.g. k/8 for 8 rollouts),
# each value gets its own bar: equal-width bins would alias them into a comb with gaps.
_MAX_DISCRETE = 40


def histogram_figure(
    per_sample: pl.DataFrame,
    *,
    column: str = "pass_rate",
    bins: int = 20,
    title: str | None = None,
    log: bool = False,
) -> Figure:
    """Counts of samples by `column` (pass_rate, mean_score or smoothed_pass_rate).

    Samples at exactly 0 and exactly 1 (always incorrect / always correct) are the ones with no
    learning signal; they get their own coloured bars outside the [0, 1] range so that they
    are never hidden inside the first or last bin. Every bar is labelled with its count.
    `log` puts counts on a log scale, for when the spikes dwarf everything else.
    """
    import numpy as np

    if column not in COLUMNS:
        known = ", ".join(COLUMNS)
        raise InputError(f"cannot histogram column '{column}' (use one of: {known})")
    if bins < 1:
        raise InputError(f"histogram needs at least one bin, got {bins}")
    require_columns(per_sample, [column], "per_sample")
    name = COLUMNS[column]
    title = title if title is not None else f"Distribution of per-sample {name}"
    scored = drop_unscored(per_sample, [column])
    n = scored.height
    if n == 0:
        return no_data_figure("no scored samples to plot", title=title)

    values = scored[column].cast(float).to_numpy().astype(np.float64)
    zero = values <= _EPS
    one = values >= 1.0 - _EPS
    inner = values[~zero & ~one]
    n_zero, n_one = int(zero.sum()), int(one.sum())

    fig = new_figure(10.0, 5.0)
    ax = fig.add_subplot()
    inner_bars, inner_counts = _draw_inner(ax, inner, bins)
    left = ax.bar(
        _ZERO_X,
        n_zero,
        width=_SPIKE_WIDTH,
        color=CATEGORY_STRONG["always_incorrect"],
        label=f"{name} = 0 ({LABELS['always_incorrect']}): {n_zero:,} ({share(n_zero, n)})",
    )
    right = ax.bar(
        _ONE_X,
        n_one,
        width=_SPIKE_WIDTH,
        color=CATEGORY_STRONG["always_correct"],
        label=f"{name} = 1 ({LABELS['always_correct']}): {n_one:,} ({share(n_one, n)})",
    )
    n_inner = len(inner)
    inner_bars.set_label(f"0 < {name} < 1 ({LABELS['mixed']}): {n_inner:,} ({share(n_inner, n)})")

    _label_spike(ax, left, n_zero, n)
    _label_spike(ax, right, n_one, n)
    _label_inner(ax, inner_bars, inner_counts)
    top = float(max([n_zero, n_one, *inner_counts]))
    _style_axes(ax, name, top=top, log=log)
    # Legend in x order (0, mixed, 1), below the axes so it never covers a bar.
    fig.legend(
        handles=[left, inner_bars, right],
        loc="outside lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(f"{title} ({n:,} samples)")
    return fig


def _draw_inner(ax: Axes, inner: np.ndarray, bins: int) -> tuple[BarContainer, list[int]]:
    """Bars for values strictly inside (0, 1): one per distinct value if few, else binned.

    Returns the bars and their counts.
    """
    import numpy as np

    distinct, counts = np.unique(inner.round(9), return_counts=True)
    if 0 < len(distinct) <= _MAX_DISCRETE:
        gaps = np.diff(np.concatenate(([0.0], distinct, [1.0])))
        width = float(min(0.7 * gaps.min(), 0.8 / bins))
        bars = ax.bar(distinct, counts, width=width, color=MEAN_COLOR)
        return bars, [int(c) for c in counts]
    hist, edges = np.histogram(inner, bins=bins, range=(0.0, 1.0))
    bars = ax.bar(
        edges[:-1],
        hist,
        width=np.diff(edges),
        align="edge",
        color=MEAN_COLOR,
        edgecolor="white",
        linewidth=0.5,
    )
    return bars, [int(c) for c in hist]


def _label_spike(ax: Axes, bars: BarContainer, count: int, n: int) -> None:
    """Count and share above a 0 / 1 spike (also when it is empty: 'none' is news too)."""
    ax.bar_label(bars, labels=[f"{count:,}\n{share(count, n)}"], fontsize=8, padding=2)


def _label_inner(ax: Axes, bars: BarContainer, counts: list[int]) -> None:
    """Counts above the interior bars; rotated when bars are many and narrow."""
    labels = [f"{c:,}" if c else "" for c in counts]
    many = len(counts) > 12
    ax.bar_label(bars, labels=labels, fontsize=7, padding=2, rotation=90 if many else 0)


def _style_axes(ax: Axes, name: str, *, top: float, log: bool) -> None:
    """Ticks that read '= 0 | 0.2 ... 0.8 | = 1', separators, head-room above the `top` bar."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    lo = -_SPIKE_GAP - _SPIKE_WIDTH
    hi = 1 + _SPIKE_GAP + _SPIKE_WIDTH
    ax.set_xlim(lo - 0.02, hi + 0.02)
    # The spikes carry the 0 and 1 ticks; the interior gets the in-between ones only, so the
    # two '0' labels cannot crowd each other.
    ax.set_xticks([_ZERO_X, 0.2, 0.4, 0.6, 0.8, _ONE_X], ["= 0", "0.2", "0.4", "0.6", "0.8", "= 1"])
    for x in (-_SPIKE_GAP / 2, 1 + _SPIKE_GAP / 2):
        ax.axvline(x, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xlabel(name)
    ax.set_ylabel("samples")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    top = max(top, 1.0)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(0.8, top * 8)  # log room for the two-line labels above the bars
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # no "1.5 samples" ticks
        ax.set_ylim(0, top * 1.22)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
