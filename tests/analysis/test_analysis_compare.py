"""curate.analysis.compare: matching runs by sample id, the figures per run (the
report's own), and what is left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curate.analysis.compare import compare_runs, per_sample_table, run_labels
from curate.errors import InputError, UsageError
from curate.report.build import build_report
from tests.conftest import long_frame


def _write(path: Path, samples: dict[str, list[float | None]]) -> Path:
    long_frame(samples).write_parquet(path)
    return path


def _simulated(path: Path, p: np.ndarray, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    scores = (rng.random((len(p), n)) < p[:, None]).astype(float)
    samples = {f"q{i}": list(row) for i, row in enumerate(scores)}
    return _write(path, samples)


def test_missing_samples_are_counted_and_left_out(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", {"x": [0, 0], "y": [1, 0], "only_a": [1, 1]})
    b = _write(tmp_path / "b.parquet", {"x": [1, 1], "y": [1, 1], "z": [None, None]})
    c = compare_runs([a, b])
    assert c.common == 2
    assert c.left_out == 2  # only_a, and z (in b but never scored)
    assert [(r.label, r.samples, r.left_out) for r in c.runs] == [("a", 3, 1), ("b", 3, 1)]
    assert sorted(c.samples["sample_id"]) == ["x", "y"]
    assert c.runs[0].summary.samples == 2  # figures on the common samples only


def test_each_runs_figures_are_the_reports(tmp_path: Path) -> None:
    """One number per label: with no sample left out, a run's figures in the comparison
    are `curate report`'s (the same `analyze`)."""
    p = np.random.default_rng(0).beta(0.5, 0.5, 300)
    a = _simulated(tmp_path / "base.parquet", p, 8, 1)
    b = _simulated(tmp_path / "tuned.parquet", np.clip(p + 0.2, 0, 1), 8, 2)
    c = compare_runs([a, b], group_size=16)
    for view, path in zip(c.runs, [a, b], strict=True):
        report = build_report(path, group_size=16).summary
        s = view.summary
        assert s.mean_score == pytest.approx(report.mean_score, rel=1e-12)
        assert s.best_of_n == pytest.approx(report.best_of_n, rel=1e-12)
        assert s.high_variance_fraction == report.high_variance_fraction
        assert s.gate["expected_open_fraction"] == pytest.approx(
            report.gate["expected_open_fraction"]
        )
        assert s.gate["interval"] == pytest.approx(report.gate["interval"])
        assert s.pass_at_k == pytest.approx(report.pass_at_k)
        assert s.categories == report.categories


def test_more_than_two_runs_compare_first_with_last(tmp_path: Path) -> None:
    a = _write(tmp_path / "step0.parquet", {"x": [0] * 8, "y": [1] * 8})
    b = _write(tmp_path / "step1.parquet", {"x": [0] * 8, "y": [1] * 8})
    c_ = _write(tmp_path / "step2.parquet", {"x": [1] * 8, "y": [0] * 8})
    c = compare_runs([a, b, c_])
    assert (c.before.label, c.after.label) == ("step0", "step2")
    assert c.sets["learned"] == 1 and c.sets["forgotten"] == 1
    assert len(c.runs) == 3
    # Neighbouring steps: nothing changes at step0 -> step1, both changes at step1 -> step2.
    assert [(s.before, s.after, s.significant) for s in c.steps] == [
        ("step0", "step1", 0),
        ("step1", "step2", 2),
    ]
    assert c.steps[1].sets["learned"] == 1 and c.steps[1].sets["forgotten"] == 1


def test_per_sample_table_names_both_sides(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", {"x": [0] * 8})
    b = _write(tmp_path / "b.parquet", {"x": [1] * 6 + [0] * 2})
    table = per_sample_table(compare_runs([a, b]))
    row = table.row(0, named=True)
    assert row["outcome_before"] == "always_incorrect" and row["outcome_after"] == "mixed"
    assert row["pass_rate_after"] == 0.75
    assert row["wilson_low_after"] < 0.75 < row["wilson_high_after"]
    assert row["learned"] and row["newly_learnable"]
    assert "change" in table.columns and "p_value" in table.columns


def test_partial_credit_uses_mann_whitney(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", {"x": [0.1, 0.2, 0.1, 0.0] * 2, "y": [0.5] * 8})
    b = _write(tmp_path / "b.parquet", {"x": [0.9, 0.8, 0.7, 1.0] * 2, "y": [0.5] * 8})
    c = compare_runs([a, b])
    assert c.test == "mann_whitney"
    assert c.sets["learned"] == 1


def test_bad_input(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.parquet", {"x": [1, 0]})
    b = _write(tmp_path / "b.parquet", {"y": [1, 0]})
    with pytest.raises(UsageError, match="at least two runs"):
        compare_runs([a])
    with pytest.raises(InputError, match="no sample is scored in every run"):
        compare_runs([a, b])
    with pytest.raises(UsageError, match="alpha"):
        compare_runs([a, a], alpha=1.5)


def test_run_labels_fall_back_to_paths_when_names_clash(tmp_path: Path) -> None:
    assert run_labels([Path("runs/base"), Path("runs/sft.parquet")]) == ["base", "sft"]
    same = [Path("a/run"), Path("b/run")]
    assert run_labels(same) == ["a/run", "b/run"]


def test_sample_ids_match_across_id_types(tmp_path: Path) -> None:
    """A CSV may read its ids as integers: ids are matched as text."""
    (tmp_path / "a.csv").write_text("sample_id,score\n1,0\n1,0\n2,1\n2,1\n")
    b = pl.DataFrame({"sample_id": ["1", "1", "2", "2"], "score": [1.0, 1.0, 1.0, 1.0]})
    b.write_parquet(tmp_path / "b.parquet")
    c = compare_runs([tmp_path / "a.csv", tmp_path / "b.parquet"])
    assert c.common == 2
