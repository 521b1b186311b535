"""Each plot kind at 10 and 100,000 samples, saved in every format."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from matplotlib.figure import Figure

from curate.plots import PLOT_KINDS, gate_figure, histogram_figure, save_figure, variance_figure

MAGIC: dict[str, Callable[[bytes], bool]] = {
    ".png": lambda head: head.startswith(b"\x89PNG\r\n\x1a\n"),
    ".pdf": lambda head: head.startswith(b"%PDF-"),
    ".svg": lambda head: head.lstrip().startswith(b"<?xml") and b"<svg" in head,
}


# The figures drawn from per-sample statistics (the length plot reads rollouts:
# tests/plots/test_plot_length.py).
PER_SAMPLE_KINDS = ("variance", "histogram", "gate")


def build(kind: str, frame: pl.DataFrame, gate_factory: Callable[..., pl.DataFrame]) -> Figure:
    """The figure of `kind` for `frame` (the gate curve is derived from the frame)."""
    if kind == "variance":
        return variance_figure(frame)
    if kind == "histogram":
        return histogram_figure(frame)
    return gate_figure(gate_factory(frame), group_size=8)


@pytest.mark.parametrize("suffix", sorted(MAGIC))
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("kind", PER_SAMPLE_KINDS)
def test_every_kind_saves_in_every_format(
    kind: str,
    size: str,
    suffix: str,
    small_frame: pl.DataFrame,
    large_frame: pl.DataFrame,
    gate_factory: Callable[..., pl.DataFrame],
    tmp_path: Path,
) -> None:
    frame = small_frame if size == "small" else large_frame
    fig = build(kind, frame, gate_factory)
    assert isinstance(fig, Figure)

    out = save_figure(fig, tmp_path / f"{kind}{suffix}")

    assert out == tmp_path / f"{kind}{suffix}"
    data = out.read_bytes()
    assert len(data) > 1000
    assert MAGIC[suffix](data[:512])
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temp file left behind


def test_plot_kinds_are_the_four_figures_and_the_reflective_view() -> None:
    # the reflective view draws one sample's reference (its own command argument)
    assert (*PER_SAMPLE_KINDS, "length", "reflective") == PLOT_KINDS


@pytest.mark.parametrize("kind", PER_SAMPLE_KINDS)
def test_no_scored_samples_still_gives_a_figure(
    kind: str,
    frame_factory: Callable[..., pl.DataFrame],
    gate_factory: Callable[..., pl.DataFrame],
    tmp_path: Path,
) -> None:
    frame = frame_factory(0, unscored=3)
    if kind == "gate":
        fig = gate_figure(gate_factory(frame_factory(5)).clear(), group_size=8)
    else:
        fig = build(kind, frame, gate_factory)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(text.startswith("no ") for text in texts)
    assert save_figure(fig, tmp_path / "empty.png").stat().st_size > 0
