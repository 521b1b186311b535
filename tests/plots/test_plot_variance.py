"""The variance plot: ordering, per-sample vs binned drawing, labels."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from curate.errors import InputError
from curate.plots import variance_figure
from curate.plots._common import CATEGORY_ORDER
from curate.plots.variance import MAX_UNBINNED, TARGET_BINS, _sorted_scored


def plotted_points(ax: Axes) -> int:
    """Data points drawn as lines/markers plus segments in collections (error bars)."""
    points = sum(len(np.asarray(line.get_xdata())) for line in ax.lines)
    for coll in ax.collections:
        points += len(coll.get_paths())
    return points


def legend_text(fig: Figure) -> str:
    return "\n".join(t.get_text() for legend in fig.legends for t in legend.get_texts())


def test_small_frame_draws_one_bar_and_cross_per_scored_sample(small_frame: pl.DataFrame) -> None:
    fig = variance_figure(small_frame)
    ax = fig.axes[0]
    n = small_frame["mean_score"].drop_nulls().len()  # the unscored row is skipped
    assert n == 10
    assert ax.get_xlim() == (-0.5, n - 0.5)
    crosses = [line for line in ax.lines if line.get_marker() == "x"]
    assert len(crosses) == 1
    assert len(np.asarray(crosses[0].get_xdata())) == n
    assert any(len(c.get_paths()) == n for c in ax.collections)  # the error bars
    assert "1 without scores skipped" in ax.get_xlabel()


def test_large_frame_is_binned_to_a_bounded_number_of_points(large_frame: pl.DataFrame) -> None:
    fig = variance_figure(large_frame)
    ax = fig.axes[0]
    assert ax.get_xlim()[1] == pytest.approx(100_000 - 0.5)
    # Bins are allotted per band, so rounding may add a handful beyond the target.
    assert plotted_points(ax) <= 2 * TARGET_BINS + 20
    assert len(ax.collections) == 0  # no per-sample error bars
    assert len(ax.patches) < 20  # band shading, the spread band and the mean steps
    assert "bins of" in ax.get_xlabel()


def test_binning_starts_just_above_the_cutoff(frame_factory: Callable[..., pl.DataFrame]) -> None:
    at_cutoff = variance_figure(frame_factory(MAX_UNBINNED, seed=5)).axes[0]
    above = variance_figure(frame_factory(MAX_UNBINNED + 1, seed=5)).axes[0]
    assert "bins of" not in at_cutoff.get_xlabel()
    assert "bins of" in above.get_xlabel()


def test_legend_has_count_and_share_of_every_category(large_frame: pl.DataFrame) -> None:
    text = legend_text(variance_figure(large_frame, threshold=0.02))
    counts = large_frame.filter(pl.col("mean_score").is_not_null())["category"].value_counts()
    total = int(counts["count"].sum())
    for name, count in counts.iter_rows():
        label = name.replace("_", " ")
        assert f"{label}" in text
        assert f"{count:,} ({100 * count / total:.1f}%)" in text
    assert "var > 0.02" in text


def test_wide_bands_are_labelled_above_the_plot(large_frame: pl.DataFrame) -> None:
    texts = [t.get_text() for t in variance_figure(large_frame).axes[0].texts]
    assert any(t.startswith("incorrect") for t in texts)
    assert any(t.startswith("correct") for t in texts)


def test_samples_are_sorted_by_band_then_mean(large_frame: pl.DataFrame) -> None:
    ordered = _sorted_scored(large_frame, 0.01)
    bands = ordered["_band"].to_numpy()
    assert np.all(np.diff(bands) >= 0)
    for _, group in ordered.group_by("_band"):
        assert group["mean_score"].is_sorted()
    seen = list(dict.fromkeys(ordered["category"].to_list()))
    assert seen == [c for c in CATEGORY_ORDER if c in seen]


def test_missing_category_column_is_derived_from_the_rule(
    frame_factory: Callable[..., pl.DataFrame],
) -> None:
    frame = frame_factory(2_000, seed=7)
    derived = _sorted_scored(frame.drop("category"), 0.01)
    given = _sorted_scored(frame, 0.01)
    assert (
        derived["category"]
        .value_counts(sort=True)
        .equals(given["category"].value_counts(sort=True))
    )


def test_title_is_used(small_frame: pl.DataFrame) -> None:
    fig = variance_figure(small_frame, title="my run")
    assert fig.get_suptitle() == "my run"


def test_missing_columns_are_an_input_error(small_frame: pl.DataFrame) -> None:
    with pytest.raises(InputError, match="std_dev"):
        variance_figure(small_frame.drop("std_dev"))
