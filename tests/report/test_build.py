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
    # 3 samples x 4 rollouts: always right, always wrong, 2 of 4.
    scores = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0]
    pl.DataFrame(
        {
            "sample_id": [s for s in ("a", "b", "c") for _ in range(4)],
            "rollout_idx": [0, 1, 2, 3] * 3,
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
    assert report.checks == [] and report.failed_checks == []


def test_gates_are_checked(tmp_path: Path) -> None:
    path = write_scores(tmp_path / "s.parquet")
    report = build_report(path, fail_under_signal=0.5, max_error_rate=0.0)
    assert [g.name for g in report.checks] == ["fail-under-signal", "max-error-rate"]
    assert [g.name for g in report.failed_checks] == ["fail-under-signal"]


def test_prices_give_a_usage_section(tmp_path: Path) -> None:
    path = write_scores(tmp_path / "s.parquet")
    assert build_report(path, price_in=1.0).usage is not None


def test_bad_input_raises_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        build_report(tmp_path / "missing.parquet")


def test_multiplier_lines_in_every_case() -> None:
    """One recommendation in short lines (under 80 columns), no second one (the rule of
    thumb is context, shown apart and only where it disagrees), and no word a trainer
    would not know."""
    from curate.report.render import multiplier_lines, rule_of_thumb_note
    from curate.stats.dataset import ComputeMultiplier, rule_of_thumb, rule_of_thumb_text

    def lines(m: int, now: float, then: float, gain: float, hv: float) -> list[str]:
        rule = rule_of_thumb(hv)
        cm = ComputeMultiplier(
            recommended=m,
            rule_of_thumb=rule,
            reason="",
            rule="",
            rule_of_thumb_text=rule_of_thumb_text(rule),
            group_size=8,
            recommended_group_size=8 * m,
            expected_open_fraction=now,
            recommended_open_fraction=then,
            next_group_size=8 * (m + 1),
            next_gain=gain,
        )
        head, detail = multiplier_lines(cm)
        out = [f"compute multiplier: {head}", *(f"  {line}" for line in detail)]
        assert all(len(line) <= 78 for line in out), out
        assert not any("seed" in line or "rule of thumb" in line for line in out)
        notes.append(rule_of_thumb_note(cm, hv))
        return out

    notes: list[str | None] = []

    keep = lines(1, 0.34, 0.34, 0.004, 0.34)
    assert keep[0] == "compute multiplier: 1x (keep groups of 8 rollouts per prompt)"
    assert keep[1:3] == ["  mixed groups at G=8: 34.0%", "  groups of 16 would add only 0.4 points"]
    assert len(keep) == 3 and notes[-1] is None  # 1x agrees with the rule's 1x
    more = lines(5, 0.34, 0.62, 0.015, 0.12)
    assert more[0] == "compute multiplier: 5x (use groups of 40 rollouts per prompt)"
    assert more[1] == "  mixed groups at G=40: 62.0%, instead of 34.0% at G=8"
    note = notes[-1]
    assert note is not None and note.startswith(
        "the variance-plot rule of thumb would say 2-4x for a 12.0% learnable share"
    )
    most = lines(8, 0.10, 0.45, 0.03, 0.05)
    assert most[2] == "  groups of 72 would still add 3.0 points: filtering may pay more"
    assert notes[-1] is None  # under 10% the rule has no range: nothing to set against
    assert lines(1, 0.5, 0.5, 0.0, 0.5)[2] == "  groups of 16 would add nothing"
    assert lines(2, 0.2, 0.3, 0.01, 0.2) and notes[-1] is None  # 2x is within 1-2x
