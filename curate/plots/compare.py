"""Figures of a comparison of runs (`curate compare --plot`): the variance evolution over
checkpoints, and the pass-rate matrix (samples x runs, binned to stay readable at
100,000 samples). Every figure reads its numbers from the `Comparison`, so the plot and
the table show the same figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from curate.plots._common import BEST_COLOR, CATEGORY_STRONG, MEAN_COLOR, new_figure
from curate.stats.mixed import mixed_label

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.figure import Figure

    from curate.analysis.compare import Comparison

COMPARE_PLOT_KINDS: Final[tuple[str, ...]] = ("evolution", "matrix")
# At most this many rows in the matrix: samples are sorted, then averaged in bins.
MATRIX_ROWS: Final = 200


def evolution_figure(c: Comparison) -> Figure:
    """Per run, in the order given (checkpoints in training order): mean score and
    best-of-N (top), high-variance share and mixed groups at G (bottom)."""
    fig = new_figure(max(6.0, 1.2 * len(c.runs) + 3.0), 6.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    x = list(range(len(c.runs)))
    panels = [
        (
            top,
            "score",
            [
                ("mean score", [r.summary.mean_score for r in c.runs], MEAN_COLOR, "o", "-"),
                ("best-of-N", [r.summary.best_of_n for r in c.runs], BEST_COLOR, "x", "-"),
            ],
        ),
        (
            bottom,
            "share of samples",
            [
                (
                    "high-variance share",
                    [r.summary.high_variance_fraction for r in c.runs],
                    CATEGORY_STRONG["high_variance"],
                    "s",
                    "-",
                ),
                (
                    mixed_label(c.group_size),
                    [r.summary.gate["expected_open_fraction"] for r in c.runs],
                    CATEGORY_STRONG["low_variance"],
                    "^",
                    "--",
                ),
            ],
        ),
    ]
    for ax, ylabel, series in panels:
        # The first series is labelled above its points, the second below: the two
        # often coincide (with G = N and 0/1 scores the bottom two are equal).
        for position, (label, values, color, marker, style) in enumerate(series):
            ys = [float("nan") if v is None else float(v) for v in values]
            ax.plot(x, ys, marker=marker, linestyle=style, color=color, label=label, linewidth=2)
            for xi, yi in zip(x, ys, strict=True):
                if yi == yi:  # not NaN
                    ax.annotate(
                        f"{yi:.3f}",
                        (xi, yi),
                        textcoords="offset points",
                        xytext=(0, 7 if position == 0 else -13),
                        ha="center",
                        fontsize=8,
                        color=color,
                    )
        ax.set_ylim(-0.05, 1.1)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=9)
    bottom.set_xticks(x, [r.label for r in c.runs], rotation=20 if len(c.runs) > 4 else 0)
    bottom.set_xlim(-0.3, len(c.runs) - 0.7)
    bottom.set_xlabel("run (in the order given)")
    fig.suptitle(f"variance evolution over {len(c.runs)} runs ({c.common:,} samples in every run)")
    return fig


def pass_rate_matrix(c: Comparison, rows: int = MATRIX_ROWS) -> tuple[pl.DataFrame, int]:
    """The matrix the heat map draws: samples sorted by the first run's pass rate (then
    by their mean over the runs), averaged over consecutive bins of about
    samples/rows samples; one column per run (its label). Returns it and the bin size."""
    import polars as pl

    labels = [r.label for r in c.runs]
    frame = c.runs[0].per_sample.select("sample_id", pl.col("pass_rate").alias("_r0"))
    for i, r in enumerate(c.runs[1:], start=1):
        other = r.per_sample.select("sample_id", pl.col("pass_rate").alias(f"_r{i}"))
        frame = frame.join(other, on="sample_id", how="inner")
    cols = [f"_r{i}" for i in range(len(c.runs))]
    frame = frame.with_columns(pl.mean_horizontal(cols).alias("_mean")).sort(
        "_r0", "_mean", "sample_id"
    )
    size = max(1, -(-frame.height // rows))
    binned = (
        frame.with_row_index("_i")
        .group_by((pl.col("_i") // size).alias("_bin"))
        .agg(*(pl.col(col).mean().alias(label) for col, label in zip(cols, labels, strict=True)))
        .sort("_bin")
        .drop("_bin")
    )
    return binned, size


def matrix_figure(c: Comparison) -> Figure:
    """The pass-rate matrix as a heat map (rows: sample bins, sorted; columns: runs)."""
    import numpy as np

    matrix, size = pass_rate_matrix(c)
    fig = new_figure(max(5.0, 1.1 * len(c.runs) + 3.0), 6.5)
    ax = fig.add_subplot()
    values = matrix.to_numpy().astype(float)
    image = ax.imshow(
        values, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest"
    )
    ax.set_xticks(np.arange(len(c.runs)), matrix.columns, rotation=20 if len(c.runs) > 4 else 0)
    first = c.runs[0].label
    per = "one row per sample" if size == 1 else f"each row the mean of {size:,} samples"
    ax.set_ylabel(f"samples, sorted by pass rate in {first} ({per})")
    ticks = np.linspace(0, values.shape[0] - 1, num=min(6, values.shape[0])).round().astype(int)
    ax.set_yticks(ticks, [f"{min(c.common, int(t) * size + 1):,}" for t in ticks])
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("pass rate")
    ax.set_title(f"pass rate per sample and run ({c.common:,} samples)")
    return fig


def comparison_figure(c: Comparison, kind: str) -> Figure:
    """The figure `curate compare --plot KIND` draws."""
    if kind == "evolution":
        return evolution_figure(c)
    if kind == "matrix":
        return matrix_figure(c)
    raise ValueError(f"unknown comparison plot {kind!r} (choose from {COMPARE_PLOT_KINDS})")
