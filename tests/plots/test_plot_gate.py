"""The gate curve: log2 axis, marked group size."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

from curate.errors import InputError
from curate.plots import gate_figure


@pytest.fixture
def curve(small_frame: pl.DataFrame, gate_factory: Callable[..., pl.DataFrame]) -> pl.DataFrame:
    return gate_factory(small_frame)


def test_curve_on_log2_axis(curve: pl.DataFrame) -> None:
    ax = gate_figure(curve).axes[0]
    assert ax.get_xscale() == "log"
    (line,) = [ln for ln in ax.lines if len(np.asarray(ln.get_xdata())) == curve.height]
    assert np.asarray(line.get_ydata()).tolist() == curve["expected_open_fraction"].to_list()
    assert [t.get_text() for t in ax.get_xticklabels()][:4] == ["1", "2", "4", "8"]


def test_current_group_size_is_marked_with_its_value(curve: pl.DataFrame) -> None:
    fig = gate_figure(curve, group_size=8)
    ax = fig.axes[0]
    expected = curve.filter(pl.col("group_size") == 8)["expected_open_fraction"].item()
    assert any(t.get_text().startswith(f"mixed groups at G=8: {expected:.1%}") for t in ax.texts)
    rules = [ln for ln in ax.lines if np.asarray(ln.get_xdata()).tolist() == [8, 8]]
    assert rules
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "current group size: 8" in legend


def test_group_size_between_points_is_interpolated(curve: pl.DataFrame) -> None:
    sparse = curve.filter(pl.col("group_size").is_in([4, 16]))
    ax = gate_figure(sparse, group_size=8).axes[0]
    mid = sum(sparse["expected_open_fraction"].to_list()) / 2  # 8 is halfway in log2
    assert any(t.get_text().startswith(f"mixed groups at G=8: {mid:.1%}") for t in ax.texts)


def test_group_size_outside_the_curve_is_drawn_but_not_valued(curve: pl.DataFrame) -> None:
    fig = gate_figure(curve, group_size=256)
    assert not fig.axes[0].texts
    assert "outside the curve" in fig.legends[0].get_texts()[-1].get_text()
    assert fig.axes[0].get_xlim()[1] > 256


def test_bad_input(curve: pl.DataFrame) -> None:
    with pytest.raises(InputError, match="at least 1"):
        gate_figure(curve, group_size=0)
    with pytest.raises(InputError, match="expected_open_fraction"):
        gate_figure(curve.drop("expected_open_fraction"))


def test_interval_past_the_rollouts_taken_is_shaded() -> None:
    """A curve with 95% intervals (null where the rollouts observe the point) shades
    them and names the band in the legend; one without intervals shades nothing more."""
    curve = pl.DataFrame(
        {
            "group_size": [2, 4, 8, 16, 32],
            "expected_open_fraction": [0.2, 0.3, 0.4, 0.45, 0.5],
            "interval_low": [None, None, None, 0.42, 0.43],
            "interval_high": [None, None, None, 0.5, 0.62],
        }
    )
    fig = gate_figure(curve, group_size=8)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(text.startswith("95% interval past the rollouts taken") for text in legend)
    plain = gate_figure(curve.drop("interval_low", "interval_high"), group_size=8)
    assert not any("95% interval" in t.get_text() for t in plain.legends[0].get_texts())
    assert len(fig.axes[0].collections) == len(plain.axes[0].collections) + 1
