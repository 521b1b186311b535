"""Golden text for the report: rich table, Markdown and JSON for a small fixed score table.

tests/report/data/scores_small.csv: 8 samples x 4 rollouts, one failed rollout (s08).
Regenerate with CURATE_UPDATE_GOLDEN=1 after an intended change, and check the diff.
"""

from __future__ import annotations

import io
import json
import math

import pytest
from rich.console import Console

from curate.report.checks import evaluate_checks
from curate.report.render import render_json, render_markdown, render_table
from curate.stats import analyze
from curate.store.scores import load_scores
from tests.conftest import JSON_CONTRACT_KEYS
from tests.stats.helpers import posterior_moment

from .goldens import DATA

SOURCE = "scores_small.csv"
GATES = {"fail_under_signal": 0.5, "max_error_rate": 0.05}


@pytest.fixture(scope="module")
def analysis():
    return analyze(load_scores(DATA / SOURCE).rollouts)


def table_text(summary, gates) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=100, color_system=None, force_terminal=False)
    render_table(summary, gates, console, source=SOURCE)
    return buf.getvalue()


def test_golden_table(analysis, golden) -> None:
    golden("scores_small.txt", table_text(analysis.summary, []))


def test_golden_markdown(analysis, golden) -> None:
    golden("scores_small.md", render_markdown(analysis.summary, [], source=SOURCE))


def test_golden_json(analysis, golden) -> None:
    golden("scores_small.json", render_json(analysis.summary, [], source=SOURCE))


def test_golden_with_gates(analysis, golden) -> None:
    gates = evaluate_checks(analysis.summary, **GATES)
    golden("scores_small.gates.txt", table_text(analysis.summary, gates))
    golden("scores_small.gates.md", render_markdown(analysis.summary, gates, source=SOURCE))
    golden("scores_small.gates.json", render_json(analysis.summary, gates, source=SOURCE))


def approx(value):  # the JSON rounds every float to 6 significant digits
    return pytest.approx(value, rel=1e-5)


def test_golden_values_by_hand(analysis) -> None:
    """The numbers in the golden files, computed by hand from the CSV."""
    data = json.loads(render_json(analysis.summary, [], source=SOURCE))
    # Per-sample means: s01, s02 = 1; s03-s05 = 0; s06 = 3/4; s07 = 1/4; s08 = 2/3 (one error).
    mean = (1 + 1 + 0 + 0 + 0 + 0.75 + 0.25 + 2 / 3) / 8
    assert data["samples"] == 8
    assert data["rollouts"] == 32
    assert data["errors"] == 1
    assert data["mean_score"] == approx(mean)  # 0.458
    assert data["best_of_n"] == approx(5 / 8)
    assert data["potential_gain"] == approx(5 / 8 - mean)  # 0.167
    assert data["relative_gain"] == approx((5 / 8 - mean) / mean)  # 36.4%
    assert data["high_variance_fraction"] == approx(3 / 8)
    assert data["categories"] == {
        "always_correct": 2,
        "always_incorrect": 3,
        "high_variance": 3,
        "low_variance": 0,
    }
    # pass@2: s06 1, s07 1 - C(3,2)/C(4,2) = 1/2, s08 (2 of 3) 1; pass@4 leaves out s08.
    assert data["pass_at_k"] == approx(
        {"1": mean, "2": (2 + 1 + 0.5 + 1) / 8, "3": (2 + 1 + 0.75 + 1) / 8, "4": 4 / 7}
    )
    # Every n < G = 8: the posterior predictive 1 - E[p^8] - E[(1-p)^8] given (n, c) under
    # the fitted pass-rate prior (the NPMLE), summed here atom by atom.
    prior = analysis.prior
    summary = prior.summary()
    assert data["prior"]["kind"] == "npmle"
    assert data["prior"]["alpha"] == approx(summary["alpha"])
    assert data["prior"]["mass_at_0"] == approx(summary["mass_at_0"])
    counts = [(4, 4), (4, 4), (4, 0), (4, 0), (4, 0), (4, 3), (4, 1), (3, 2)]
    u = [
        1 - posterior_moment(prior, n, c, 8) - posterior_moment(prior, n, c, 0, 8)
        for n, c in counts
    ]
    assert data["gate"]["expected_open_fraction"] == approx(sum(u) / 8)
    interval = data["gate"]["interval"]  # every sample has n < G: a model-based figure
    assert interval["low"] <= data["gate"]["expected_open_fraction"] <= interval["high"]
    multiplier = data["compute_multiplier"]
    assert multiplier["rule_of_thumb"] == {"low": 1, "high": 1}  # 37.5% > 30%
    assert multiplier["rule_of_thumb_text"] == "1x"
    assert multiplier["expected_open_fraction"] == data["gate"]["expected_open_fraction"]
    assert data["top_errors"] == [{"error": "timeout", "count": 1}]  # s08's failed rollout
    assert data["by_group"] == [] and data["group_by"] is None

    assert data["warnings"] == [
        "ragged rollout counts: 3 to 4 scored rollouts per sample",
        "1 rollout(s) failed (3.1%); they are excluded from every statistic",
        "only 8 samples: estimates at this size are noisy",
    ]


def test_golden_files_show_hand_values(golden) -> None:
    """The rendered files carry the hand-computed numbers, formatted."""
    from .goldens import GOLDEN, update_golden

    if update_golden():
        pytest.skip("regenerating")
    md = (GOLDEN / "scores_small.md").read_text(encoding="utf-8")
    for line in (
        "| mean score | 0.458 |",
        "| best-of-N | 0.625 |",
        "| potential gain | +0.167 |",
        "| relative gain | +36.4% |",
        "| high-variance share | 37.5% |",
        "| errors | 1 (3.1%) |",
        "| high variance (learnable) | 3 | 37.5% |",
        "| 0.458 | 0.562 | 0.594 | 0.571 |",
    ):
        assert line in md, line
    txt = (GOLDEN / "scores_small.gates.txt").read_text(encoding="utf-8")
    assert "FAIL fail-under-signal: high-variance share 37.5% < required 50.0%" in txt
    assert "PASS max-error-rate: error rate 3.12% (1 of 32 rollouts) <= allowed 5.00%" in txt


def test_json_contract_keys(analysis) -> None:
    data = json.loads(render_json(analysis.summary, [], source=SOURCE))
    for key in sorted(JSON_CONTRACT_KEYS):
        assert key in data, key
    assert set(data["categories"]) == {
        "always_correct",
        "always_incorrect",
        "high_variance",
        "low_variance",
    }
    assert set(data["gate"]) >= {"group_size", "expected_open_fraction"}
    assert set(data["compute_multiplier"]) >= {"recommended", "rule_of_thumb", "reason"}
    assert all(k.isdigit() for k in data["pass_at_k"])
    assert data["passed"] is True and data["gates"] == []


def test_json_has_no_nan(rollouts_all_zero) -> None:
    text = render_json(rollouts_all_zero.summary, [])
    data = json.loads(text)  # strict JSON: NaN would be rejected by other parsers
    assert "NaN" not in text and "Infinity" not in text
    assert data["relative_gain"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in data.values())


@pytest.fixture
def rollouts_all_zero():
    import polars as pl

    frame = pl.DataFrame(
        {"sample_id": ["a", "a", "b"], "rollout_idx": [0, 1, 0], "score": [0.0, 0.0, 0.0]},
        schema_overrides={"rollout_idx": pl.Int32},
    ).with_columns(pl.lit(None, dtype=pl.String).alias("error"))
    return analyze(frame)
