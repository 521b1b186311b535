"""build_report: the report as a library call (what `curate report` renders)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from curate.errors import InputError
from curate.report.build import build_report
from curate.stats import analyze
from curate.store.scores import load_scores


def write_scores(path: Path) -> Path:
    # 3 samples x 4 runs: always right, always wrong, 2 of 4.
    scores = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0]
    pl.DataFrame(
        {
            "sample_id": [s for s in ("a", "b", "c") for _ in range(4)],
            "run_idx": [0, 1, 2, 3] * 3,
            "score": [float(x) for x in scores],
        }
    ).write_parquet(path)
    return path


def test_summary_matches_the_per_sample_analysis(tmp_path: Path) -> None:
    path = write_scores(tmp_path / "s.parquet")
    report = build_report(path, group_size=4)
    want = analyze(load_scores(path).rollouts, group_size=4).summary
    assert (
        report.summary.categories
        == want.categories
        == {
            "always_correct": 1,
            "always_incorrect": 1,
            "high_variance": 1,
            "low_variance": 0,
        }
    )
    assert report.summary.mean_score == pytest.approx(0.5)
    assert report.summary.gate == want.gate
    assert report.source == str(path)
    assert report.usage is None
    assert report.gates == [] and report.failed_gates == []


def test_gates_are_checked(tmp_path: Path) -> None:
    path = write_scores(tmp_path / "s.parquet")
    report = build_report(path, fail_under_signal=0.5, max_error_rate=0.0)
    assert [g.name for g in report.gates] == ["fail-under-signal", "max-error-rate"]
    assert [g.name for g in report.failed_gates] == ["fail-under-signal"]


def test_prices_give_a_usage_section(tmp_path: Path) -> None:
    path = write_scores(tmp_path / "s.parquet")
    assert build_report(path, price_in=1.0).usage is not None


def test_bad_input_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        build_report(tmp_path / "missing.parquet")
