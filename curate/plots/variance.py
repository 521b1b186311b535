"""The variance plot: per-sample mean score ± std dev and best score, sorted into category bands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from curate.core.outcome import DEFAULT_THRESHOLD, category_expr
from curate.plots._common import (
    BEST_COLOR,
    CATEGORY_COLORS,
    CATEGORY_LABELS,
    CATEGORY_ORDER,
    CATEGORY_SHORT,
    MEAN_COLOR,
    MEAN_DARK,
    drop_unscored,
    new_figure,
    no_data_figure,
    require_columns,
    share,
)

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.container import Container
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

# Up to this many samples every sample gets its own error bar; above it a point per sample
# turns into a solid wall, so we aggregate consecutive (sorted) samples into bins.
MAX_UNBINNED = 400
# About this many bins in total when binning: enough to show the shape inside each band,
# few enough that each bin is still a few pixels wide at the default figure size.
TARGET_BINS = 200
# A band narrower than this share of the x axis gets no label above the plot (it would
# collide with its neighbours); its count is still in the legend.
MIN_LABELLED_BAND = 0.09

_OTHER = "other"
_REQUIRED = ("mean_score", "std_dev", "best_score")


@dataclass(frozen=True)
class _Band:
    """A contiguous run of samples of one category in the sorted order: [start, stop)."""

    category: str
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start


def variance_figure(
    per_sample: pl.DataFrame,
    *,
    title: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Figure:
    """Mean ± std (blue) and best score (red crosses) per sample, sorted into category bands.

    `threshold` is the variance above which a mixed sample counts as high variance; it is only
    used to derive `category` where the column is missing or null, and to label the legend.
    Above `MAX_UNBINNED` samples, consecutive samples in the sorted order are averaged into
    bins (never across a band boundary).
    """
    import numpy as np

    require_columns(per_sample, _REQUIRED, "per_sample")
    title = title if title is not None else "Per-sample score variance"
    scored = _sorted_scored(per_sample, threshold)
    n = scored.height
    skipped = per_sample.height - n
    if n == 0:
        return no_data_figure("no scored samples to plot", title=title)

    mean = scored["mean_score"].to_numpy().astype(np.float64)
    std = scored["std_dev"].to_numpy().astype(np.float64)
    best = scored["best_score"].to_numpy().astype(np.float64)
    bands = _bands(scored["category"].to_list())

    fig = new_figure(10.0, 5.6)
    ax = fig.add_subplot()
    _shade_bands(ax, bands, n)
    if n <= MAX_UNBINNED:
        handles = _draw_samples(ax, mean, std, best)
        how = f"{n:,} samples"
    else:
        handles, n_bins = _draw_bins(ax, bands, mean, std, best)
        how = f"{n:,} samples in {n_bins} bins of ~{n / n_bins:,.0f}"
    if skipped:
        how += f" ({skipped:,} without scores skipped)"

    ax.set_xlim(-0.5, n - 0.5)
    # Scores live in [0, 1]; a little head-room keeps the crosses at 0 and 1 off the frame.
    ax.set_ylim(-0.05, 1.05)
    ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("score")
    ax.set_xlabel(f"sample rank, sorted by category then mean score — {how}")
    _format_x_ticks(ax, n)
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)

    handles.extend(_category_handles(bands, n, threshold))
    # Legend below the axes so it can never cover data, however the bands fall.
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(title)
    return fig


def _sorted_scored(per_sample: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Scored rows with a known `category`, sorted by band, then mean score, then best score."""
    import polars as pl

    frame = drop_unscored(per_sample, ("mean_score", "best_score"))
    # A sample with a single scored rollout may have no spread recorded; its spread is zero.
    frame = frame.with_columns(
        pl.col("std_dev").cast(pl.Float64).fill_nan(None).fill_null(0.0).alias("std_dev"),
        pl.col("mean_score").cast(pl.Float64),
        pl.col("best_score").cast(pl.Float64),
    )
    if "variance" not in frame.columns:
        # A per-sample frame that carries only the spread: its square is the variance.
        frame = frame.with_columns((pl.col("std_dev") ** 2).alias("variance"))
    derived = _derived_category(frame, threshold)
    if "category" in frame.columns:
        category = pl.col("category").cast(pl.String).fill_null(derived)
    else:
        category = derived
    frame = frame.with_columns(
        pl.when(category.is_in(list(CATEGORY_ORDER)))
        .then(category)
        .otherwise(pl.lit(_OTHER))
        .alias("category")
    )
    order = {name: i for i, name in enumerate((*CATEGORY_ORDER, _OTHER))}
    frame = frame.with_columns(
        pl.col("category").replace_strict(order, return_dtype=pl.Int64).alias("_band")
    )
    keys = ["_band", "mean_score", "best_score"]
    if "sample_id" in frame.columns:
        keys.append("sample_id")  # deterministic order among ties
    return frame.sort(keys, maintain_order=True)


def _derived_category(frame: pl.DataFrame, threshold: float) -> pl.Expr:
    """The category rule (`curate.core.outcome`), for rows where `category` is not given.
    The frame holds scored samples and a `variance` column."""

    worst = "worst_score" if "worst_score" in frame.columns else None
    return category_expr(threshold, n=None, worst=worst)


def _bands(categories: list[str]) -> list[_Band]:
    """Contiguous runs of equal category in the (already sorted) list."""
    bands: list[_Band] = []
    start = 0
    for i in range(1, len(categories) + 1):
        if i == len(categories) or categories[i] != categories[start]:
            bands.append(_Band(categories[start], start, i))
            start = i
    return bands


def _shade_bands(ax: Axes, bands: list[_Band], n: int) -> None:
    """Pale background per band, a rule between bands, and a count label above wide bands."""
    for band in bands:
        ax.axvspan(
            band.start - 0.5,
            band.stop - 0.5,
            color=CATEGORY_COLORS.get(band.category, CATEGORY_COLORS[_OTHER]),
            alpha=0.4,
            linewidth=0,
            zorder=0,
        )
        if band.start > 0:
            ax.axvline(band.start - 0.5, color="#777777", linewidth=0.8, linestyle="--", zorder=1)
        if band.size / n >= MIN_LABELLED_BAND:
            name = CATEGORY_SHORT.get(band.category, band.category)
            # x in data units, y in axes units: the label sits just above the frame.
            ax.text(
                (band.start + band.stop - 1) / 2,
                1.01,
                f"{name}\n{band.size:,} · {share(band.size, n)}",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
                color="#333333",
            )


def _draw_samples(
    ax: Axes, mean: np.ndarray, std: np.ndarray, best: np.ndarray
) -> list[Artist | Container]:
    """One thick blue error bar and one red cross per sample."""
    import numpy as np

    n = len(mean)
    x = np.arange(n)
    # Bars get thinner as samples get denser, so neighbours never merge into one block.
    bar_width = float(np.clip(260.0 / n, 1.2, 9.0))
    marker = float(np.clip(180.0 / n, 2.5, 9.0))
    # Scores are bounded, so the bar is clipped to [0, 1] instead of poking out of the plot.
    lower = mean - np.clip(mean - std, 0.0, 1.0)
    upper = np.clip(mean + std, 0.0, 1.0) - mean
    bars = ax.errorbar(
        x,
        mean,
        yerr=np.vstack([lower, upper]),
        fmt="o",
        color=MEAN_COLOR,
        # A hollow dot, so the mean stays visible on top of its own (same-colour) bar.
        markerfacecolor="white",
        markeredgecolor=MEAN_DARK,
        markeredgewidth=1.0,
        markersize=max(3.0, marker * 0.6),
        elinewidth=bar_width,
        ecolor=MEAN_COLOR,
        alpha=0.85,
        capsize=0,
        zorder=3,
        label="mean score ± std dev",
    )
    (crosses,) = ax.plot(
        x,
        best,
        linestyle="none",
        marker="x",
        markersize=marker,
        markeredgewidth=max(1.0, marker / 4),
        color=BEST_COLOR,
        zorder=4,
        label="best score",
    )
    return [bars, crosses]


def _draw_bins(
    ax: Axes, bands: list[_Band], mean: np.ndarray, std: np.ndarray, best: np.ndarray
) -> tuple[list[Artist | Container], int]:
    """Per-bin averages as steps, a shaded mean ± std band, and red crosses for best scores."""
    import numpy as np

    edges = _bin_edges(bands, len(mean))
    starts = edges[:-1]
    counts = np.diff(edges).astype(np.float64)
    bin_mean = np.add.reduceat(mean, starts) / counts
    # Pooled within-sample spread (root of the mean variance): what an average sample's
    # error bar would show, so the binned picture reads like the per-sample one.
    bin_std = np.sqrt(np.add.reduceat(std**2, starts) / counts)
    bin_best = np.add.reduceat(best, starts) / counts
    x_edges = edges.astype(np.float64) - 0.5
    centers = (x_edges[:-1] + x_edges[1:]) / 2

    spread = ax.stairs(
        np.clip(bin_mean + bin_std, 0.0, 1.0),
        x_edges,
        baseline=np.clip(bin_mean - bin_std, 0.0, 1.0),
        fill=True,
        color=MEAN_COLOR,
        alpha=0.3,
        linewidth=0,
        zorder=2,
        label="± std dev (pooled within bin)",
    )
    line = ax.stairs(
        bin_mean,
        x_edges,
        baseline=None,  # no vertical drop to 0 at the two ends
        color=MEAN_COLOR,
        linewidth=1.8,
        zorder=3,
        label="mean score (bin average)",
    )
    (crosses,) = ax.plot(
        centers,
        bin_best,
        linestyle="none",
        marker="x",
        markersize=4,
        markeredgewidth=1.0,
        color=BEST_COLOR,
        zorder=4,
        label="best score (bin average)",
    )
    return [line, spread, crosses], len(starts)


def _bin_edges(bands: list[_Band], n: int) -> np.ndarray:
    """Bin boundaries (sample indices, first 0, last n) that never straddle a band boundary.

    Each band gets bins in proportion to its size, at least one, at most one per sample.
    """
    import numpy as np

    edges: list[int] = [0]
    for band in bands:
        k = int(min(band.size, max(1, round(band.size * TARGET_BINS / n))))
        inner = np.linspace(band.start, band.stop, k + 1).round().astype(np.int64)
        edges.extend(int(e) for e in inner[1:])
    return np.unique(np.asarray(edges, dtype=np.int64))


def _category_handles(bands: list[_Band], n: int, threshold: float) -> list[Patch]:
    """Legend patches for all four categories (zero counts included), with counts and shares."""
    from matplotlib.patches import Patch

    counts: dict[str, int] = {}
    for band in bands:
        counts[band.category] = counts.get(band.category, 0) + band.size
    handles: list[Patch] = []
    for name in (*CATEGORY_ORDER, _OTHER):
        if name == _OTHER and name not in counts:
            continue
        label = CATEGORY_LABELS.get(name, "unknown category")
        if name == "high_variance":
            label += f" (var > {threshold:g})"
        count = counts.get(name, 0)
        handles.append(
            Patch(
                facecolor=CATEGORY_COLORS[name],
                edgecolor="#777777",
                linewidth=0.5,
                label=f"{label}: {count:,} ({share(count, n)})",
            )
        )
    return handles


def _format_x_ticks(ax: Axes, n: int) -> None:
    """Integer sample ranks, with thousands separators once they get long."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
