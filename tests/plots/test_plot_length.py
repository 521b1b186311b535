"""`curate plot --kind length`: lengths by outcome, with the run's max_tokens and the
recommendation drawn where the report puts them."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from curate.cli.app import app
from curate.plots import length_figure
from curate.stats.lengths import length_summary, outcome_expr


def _rows() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "sample_id": ["a"] * 6 + ["b"] * 4,
            "score": [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
            "error": [None] * 10,
            "truncated": [False] * 6 + [True] * 4,
            "completion_tokens": [10, 20, 30, 40, 50, 60, 100, 100, 100, 100],
        }
    )


def test_figure_marks_the_limit_and_the_recommendation() -> None:
    rows = _rows()
    section = length_summary(rows, max_tokens=100)
    fig = length_figure(rows.with_columns(outcome_expr()), section)
    ax = fig.axes[0]
    xs = sorted(line.get_xdata()[0] for line in ax.get_lines() if len(line.get_xdata()))
    assert xs == [60, 100]  # recommended (p99 of right answers), the run's max_tokens
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "truncated (4, 40.0%)" in labels and "right (5, 50.0%)" in labels
    assert any(label.startswith("recommended: 60 (lower bound)") for label in labels)
    heights = sum(p.get_height() for p in ax.patches)
    assert heights == 10  # every measured rollout is in one bar


def test_cli_writes_the_plot(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    _rows().write_parquet(path)
    out = tmp_path / "length.png"
    result = CliRunner().invoke(app, ["plot", str(path), "--kind", "length", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG")


def test_without_token_counts_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    _rows().drop("completion_tokens").write_parquet(path)
    out = tmp_path / "length.png"
    result = CliRunner().invoke(app, ["plot", str(path), "--kind", "length", "-o", str(out)])
    assert result.exit_code == 2
    assert "the length plot needs token counts" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_the_axis_fits_the_lengths_seen_not_max_tokens() -> None:
    # Short answers under a large max_tokens: the class of runs where the old axis
    # (0..max_tokens) squeezed every bar into the leftmost few pixels.
    rows = _rows().with_columns(pl.lit(False).alias("truncated"))
    for max_tokens in (4096, 65536):
        section = length_summary(rows, max_tokens=max_tokens)
        fig = length_figure(rows.with_columns(outcome_expr()), section)
        ax = fig.axes[0]
        right = ax.get_xlim()[1]
        assert 100 <= right <= 110, right  # the longest completion is 100 tokens
        xs = [line.get_xdata()[0] for line in ax.get_lines() if len(line.get_xdata())]
        assert max_tokens not in xs  # not drawn off the axis, but named in the legend
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert f"max_tokens of the run: {max_tokens:,} (beyond the longest completion)" in labels
