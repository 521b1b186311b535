"""Comparison figures: the evolution lines carry the table's numbers, and the pass-rate
matrix is sorted and binned (readable at 100,000 samples)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curate.analysis.compare import Comparison, compare_runs
from curate.plots.compare import (
    MATRIX_ROWS,
    comparison_figure,
    evolution_figure,
    matrix_figure,
    pass_rate_matrix,
)
from curate.plots.save import save_figure
from tests.conftest import long_frame


def _runs(tmp_path: Path, rates: list[np.ndarray], n: int = 8, seed: int = 0) -> Comparison:
    rng = np.random.default_rng(seed)
    paths = []
    for i, p in enumerate(rates):
        scores = (rng.random((len(p), n)) < p[:, None]).astype(float)
        path = tmp_path / f"ckpt{i}.parquet"
        pl.DataFrame(
            {
                "sample_id": np.repeat([f"s{j:06d}" for j in range(len(p))], n),
                "rollout_idx": np.tile(np.arange(n, dtype=np.int32), len(p)),
                "score": scores.ravel(),
            }
        ).write_parquet(path)
        paths.append(path)
    return compare_runs(paths)


def test_evolution_lines_are_the_tables_numbers(tmp_path: Path) -> None:
    p = np.random.default_rng(1).beta(0.5, 0.5, 200)
    c = _runs(tmp_path, [p, np.clip(p + 0.1, 0, 1), np.clip(p + 0.3, 0, 1)])
    fig = evolution_figure(c)
    top, bottom = fig.axes[:2]
    lines = {line.get_label(): list(line.get_ydata()) for line in [*top.lines, *bottom.lines]}
    assert lines["mean score"] == [r.summary.mean_score for r in c.runs]
    assert lines["best-of-N"] == [r.summary.best_of_n for r in c.runs]
    assert lines["high-variance share"] == [r.summary.high_variance_fraction for r in c.runs]
    assert lines["mixed groups at G=8"] == [
        r.summary.gate["expected_open_fraction"] for r in c.runs
    ]
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["ckpt0", "ckpt1", "ckpt2"]
    save_figure(fig, tmp_path / "evo.png")


def test_matrix_sorts_by_the_first_run_and_bins_by_hand(tmp_path: Path) -> None:
    # 4 samples, N = 8: first-run rates 1, 0, 0.5, 0 -> sorted 0, 0, 0.5, 1 (ties by the
    # mean over runs: the sample that later passes comes second).
    a = {"s0": [1] * 8, "s1": [0] * 8, "s2": [1, 0] * 4, "s3": [0] * 8}
    b = {"s0": [1] * 8, "s1": [1] * 8, "s2": [1, 0] * 4, "s3": [0] * 8}
    long_frame(a).write_parquet(tmp_path / "a.parquet")
    long_frame(b).write_parquet(tmp_path / "b.parquet")
    c = compare_runs([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    matrix, size = pass_rate_matrix(c)
    assert size == 1 and matrix.columns == ["a", "b"]
    assert matrix.rows() == [(0.0, 0.0), (0.0, 1.0), (0.5, 0.5), (1.0, 1.0)]
    binned, size = pass_rate_matrix(c, rows=2)
    assert size == 2
    assert binned.rows() == [(0.0, 0.5), (0.75, 0.75)]


def test_matrix_stays_readable_at_100k_samples(tmp_path: Path) -> None:
    p = np.random.default_rng(2).beta(0.5, 0.5, 100_000)
    c = _runs(tmp_path, [p, np.clip(p + 0.2, 0, 1)])
    matrix, size = pass_rate_matrix(c)
    assert matrix.height == MATRIX_ROWS and size == 500
    first = matrix["ckpt0"].to_list()
    assert first == sorted(first)  # sorted by the first run
    # Binning keeps the mean: the bins' mean is the run's mean pass rate.
    assert float(np.mean(matrix["ckpt1"].to_numpy())) == pytest.approx(
        c.runs[1].summary.mean_score, abs=1e-9
    )
    fig = matrix_figure(c)
    image = fig.axes[0].images[0]
    assert image.get_array().shape == (MATRIX_ROWS, 2)
    save_figure(fig, tmp_path / "matrix.png")


def test_unknown_kind(tmp_path: Path) -> None:
    p = np.full(10, 0.5)
    with pytest.raises(ValueError, match="unknown comparison plot"):
        comparison_figure(_runs(tmp_path, [p, p]), "violin")
