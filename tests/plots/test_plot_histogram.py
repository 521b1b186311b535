"""The pass-rate histogram: separate 0 / 1 spikes, labelled counts."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import pytest
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from curate.errors import InputError
from curate.plots import histogram_figure


def bar_labels(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def bars(ax: Axes) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


@pytest.mark.parametrize("fixture", ["small_frame", "large_frame"])
def test_spikes_carry_the_exact_zero_and_one_counts(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    frame: pl.DataFrame = request.getfixturevalue(fixture)
    rates = frame["pass_rate"].drop_nulls()
    n = rates.len()
    zeros, ones = int((rates == 0).sum()), int((rates == 1).sum())
    ax = histogram_figure(frame).axes[0]
    labels = bar_labels(ax)
    assert f"{zeros:,}\n{100 * zeros / n:.1f}%" in labels
    assert f"{ones:,}\n{100 * ones / n:.1f}%" in labels
    # The spike bars are outside [0, 1], so no interior bin can hide them.
    heights = {round(p.get_x() + p.get_width() / 2, 6): p.get_height() for p in bars(ax)}
    assert heights[min(heights)] == zeros
    assert heights[max(heights)] == ones
    assert min(heights) < 0 < 1 < max(heights)
    # Everything scored is counted exactly once.
    assert sum(heights.values()) == n


def test_large_frame_has_few_bars(large_frame: pl.DataFrame) -> None:
    ax = histogram_figure(large_frame, column="mean_score").axes[0]
    assert len(ax.patches) <= 45


def test_spikes_have_their_own_colours(small_frame: pl.DataFrame) -> None:
    ax = histogram_figure(small_frame).axes[0]
    by_x = sorted(bars(ax), key=lambda p: p.get_x())
    left, inner, right = by_x[0], by_x[1], by_x[-1]
    colours = {left.get_facecolor(), inner.get_facecolor(), right.get_facecolor()}
    assert len(colours) == 3


def test_log_scale(large_frame: pl.DataFrame) -> None:
    assert histogram_figure(large_frame, log=True).axes[0].get_yscale() == "log"


def test_bad_arguments_are_input_errors(frame_factory: Callable[..., pl.DataFrame]) -> None:
    frame = frame_factory(20)
    with pytest.raises(InputError, match="variance"):
        histogram_figure(frame, column="variance")
    with pytest.raises(InputError, match="bin"):
        histogram_figure(frame, bins=0)
    with pytest.raises(InputError, match="pass_rate"):
        histogram_figure(frame.drop("pass_rate"))
