"""Grader agreement: Cohen's kappa, Spearman's rho, the confusion table and outcome changes."""

from __future__ import annotations

import math
import random

import polars as pl
import pytest

from curate.stats.agreement import agreement, cohen_kappa, spearman


def _rows(scores: dict[str, list[float | None]]) -> pl.DataFrame:
    rows = [
        (sid, i, s, None if s is not None else "server_error: 500")
        for sid, values in scores.items()
        for i, s in enumerate(values)
    ]
    return pl.DataFrame(
        rows,
        schema={
            "sample_id": pl.String,
            "rollout_idx": pl.Int32,
            "score": pl.Float64,
            "error": pl.String,
        },
        orient="row",
    )


def test_kappa_textbook_example() -> None:
    # 50 items: both yes 20, first-only 5, second-only 10, both no 15 -> p_o 0.7, p_e 0.5.
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)
    assert cohen_kappa(10, 0, 0, 10) == pytest.approx(1.0)
    assert cohen_kappa(0, 10, 10, 0) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa(10, 0, 0, 0))  # both constant alike: undefined
    assert math.isnan(cohen_kappa(0, 0, 0, 0))


def test_spearman_with_ties_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(3)
    a = [rng.choice([0.0, 0.25, 0.5, 1.0]) for _ in range(200)]
    b = [min(1.0, max(0.0, x + rng.gauss(0, 0.3))) for x in a]
    expected = stats.spearmanr(a, b).statistic
    assert spearman(pl.Series(a), pl.Series(b)) == pytest.approx(expected, abs=1e-12)
    assert spearman(pl.Series([1.0, 2.0, 3.0]), pl.Series([3.0, 1.0, 2.0])) == pytest.approx(-0.5)
    assert math.isnan(spearman(pl.Series([1.0, 1.0]), pl.Series([0.0, 1.0])))


def test_binary_agreement_table_and_outcome_changes() -> None:
    first = _rows({"a": [1, 1, 1, 1], "b": [1, 0, 1, 0], "c": [0, 0, 0, 0], "d": [1, None, 0, 1]})
    second = _rows({"a": [1, 1, 0, 1], "b": [1, 0, 1, 0], "c": [0, 1, 0, 0], "d": [1, 1, None, 1]})
    result = agreement(first, second)
    assert result.binary
    assert (result.pairs, result.only_first, result.only_second, result.neither) == (14, 1, 1, 0)
    # Pairs: a 3 agree-pass + 1 first-only; b 2+2 agree; c 3 agree-fail + 1 second-only; d 2 pass.
    assert (
        result.both_pass,
        result.first_only_pass,
        result.second_only_pass,
        result.both_fail,
    ) == (7, 1, 1, 5)
    assert result.kappa == pytest.approx(cohen_kappa(7, 1, 1, 5))
    changed = {c.sample_id: (c.before, c.after) for c in result.changes}
    assert changed == {
        "a": ("always_correct", "mixed"),
        "c": ("always_incorrect", "mixed"),
        "d": ("mixed", "always_correct"),
    }
    assert result.outcome_table["always_correct"]["mixed"] == 1
    assert sum(sum(row.values()) for row in result.outcome_table.values()) == result.samples == 4


def test_continuous_agreement() -> None:
    first = _rows({"a": [0.2, 0.4, 0.6, 0.8], "b": [0.5, 0.5, 0.5, 0.5]})
    second = _rows({"a": [0.1, 0.3, 0.7, 0.9], "b": [0.5, 0.5, 0.5, 1.0]})
    result = agreement(first, second)
    assert not result.binary
    assert result.spearman == pytest.approx(
        spearman(
            pl.Series([0.2, 0.4, 0.6, 0.8, 0.5, 0.5, 0.5, 0.5]),
            pl.Series([0.1, 0.3, 0.7, 0.9, 0.5, 0.5, 0.5, 1.0]),
        )
    )
    assert result.exact_agreement == pytest.approx(3 / 8)
    assert result.mean_abs_difference == pytest.approx((0.1 * 4 + 0.5) / 8)
    # Constant partial credit is "mixed" (neither all full credit nor all zero).
    assert result.changes == []
    assert result.second_only_pass == 1 and result.both_fail == 7
