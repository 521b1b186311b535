"""Completion length by outcome (right, wrong, truncated), with the run's max_tokens and
the recommended max_tokens marked: the figures of the report's `lengths` section."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from curate.plots._common import new_figure, no_data_figure, share

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.figure import Figure

# Drawn in this order (stacked bottom to top), in these colours.
OUTCOME_COLORS: dict[str, str] = {
    "right": "#31a354",
    "wrong": "#636363",
    "truncated": "#e6550d",
}
LIMIT_COLOR = "#d62728"
RECOMMEND_COLOR = "#1f77b4"


def length_figure(
    rows: pl.DataFrame, section: dict[str, Any], *, bins: int = 40, title: str | None = None
) -> Figure:
    """Stacked histogram of `completion_tokens` by `outcome` (rows as
    `curate.analysis.lengths.load_lengths` gives them), the run's max_tokens and the
    recommendation from `section` (the report's `lengths`) as vertical lines."""
    import numpy as np
    import polars as pl

    title = title or "Completion length by outcome"
    measured = rows.filter(
        pl.col("outcome").is_not_null() & pl.col("completion_tokens").is_not_null()
    )
    if measured.height == 0:
        return no_data_figure("no rollouts with token counts to plot", title=title)
    lengths = measured["completion_tokens"].to_numpy()
    # The axis fits the lengths seen (and the recommendation), not max_tokens: a run
    # whose answers stop at 40 tokens of 4,096 would otherwise be one bar at the left.
    limit, rec = section.get("max_tokens"), section.get("recommended_max_tokens")
    top = int(max(lengths.max(), rec or 0, 1))
    # Token counts are integers: each bar covers `width` whole counts, centred on them,
    # so a count is never split between bars nor merged into the last one.
    width = max(1, math.ceil((top + 1) / bins))
    edges = np.arange(0, top + width + 1, width) - 0.5
    fig = new_figure(9.0, 4.8)
    ax = fig.add_subplot()
    total = measured.height
    bottom = np.zeros(len(edges) - 1)
    for outcome, color in OUTCOME_COLORS.items():
        values = measured.filter(pl.col("outcome") == outcome)["completion_tokens"].to_numpy()
        counts, _ = np.histogram(values, bins=edges)
        label = f"{outcome} ({len(values):,}, {share(len(values), total)})"
        ax.bar(
            edges[:-1], counts, width=np.diff(edges), bottom=bottom, align="edge",
            color=color, label=label, edgecolor="white", linewidth=0.3,
        )  # fmt: skip
        bottom += counts
    if limit is not None:
        beyond = limit > edges[-1]
        if not beyond:
            ax.axvline(limit, color=LIMIT_COLOR, linestyle="-", linewidth=1.6)
        where = " (beyond the longest completion)" if beyond else ""
        ax.plot([], [], color=LIMIT_COLOR, label=f"max_tokens of the run: {limit:,}{where}")
    if rec is not None:
        ax.axvline(rec, color=RECOMMEND_COLOR, linestyle="--", linewidth=1.6)
        cut = section.get("recommended_cut_share")
        note = f", cuts {cut:.1%}" if cut is not None else ""
        bound = " (lower bound)" if section.get("recommended_is_lower_bound") else ""
        ax.plot(
            [], [], color=RECOMMEND_COLOR, linestyle="--",
            label=f"recommended: {rec:,}{bound}, p99 of right{note}",
        )  # fmt: skip
    ax.set_xlabel("completion tokens")
    ax.set_ylabel("rollouts")
    rate = section.get("truncation_rate")
    ax.set_title(title + (f": {rate:.1%} truncated" if rate is not None else ""))
    ax.set_xlim(-0.5, edges[-1])
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return fig
