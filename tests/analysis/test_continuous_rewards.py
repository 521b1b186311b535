"""Continuous rewards (partial credit, a judge's x/10) through report, plot, filter and
allocate: one definition of an informative sample (its rewards are not all equal), and
no figure that reads the full-credit rate where the reward is what matters."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from curate.allocation import plan_rollouts
from curate.analysis import load_analysis
from curate.filtering import FilterRequest, filter_run
from curate.report.build import build_report


@pytest.fixture(scope="module")
def continuous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 samples x 8 rollouts: constant 0.5 (uninformative), {0, .25, .5}, uniform,
    always 1.0, and {0.4, 0.6} (informative, low variance)."""
    rng = random.Random(0)
    rows = []
    for s in range(60):
        kind = s % 5
        for r in range(8):
            v = [
                0.5,
                rng.choice([0.0, 0.25, 0.5]),
                rng.random(),
                1.0,
                rng.choice([0.4, 0.6]),
            ][kind]
            rows.append((f"s{s:02d}-{kind}", r, v))
    path = tmp_path_factory.mktemp("cont") / "scores.parquet"
    pl.DataFrame(rows, schema=["sample_id", "rollout_idx", "score"], orient="row").write_parquet(
        path
    )
    return path


def test_informative_means_not_all_equal_everywhere(continuous: Path) -> None:
    per = load_analysis(continuous).per_sample
    equal = per["best_score"] == per["worst_score"]
    # The gate odds, the zero-variance test and allocate's zero_signal agree sample by sample.
    assert ((per["gate_open_probability"] == 0) == equal).all()
    assert ((per["variance"] == 0) == equal).all()
    plan = plan_rollouts(continuous, 600).frame.join(per, on="sample_id")
    assert (plan["zero_signal"] == (plan["best_score"] == plan["worst_score"])).all()
    # Constant 0.5 is neither always correct nor always incorrect, and never learnable.
    constant = per.filter(pl.col("sample_id").str.ends_with("-0"))
    assert (constant["category"] == "low_variance").all()
    assert (constant["gate_open_probability"] == 0).all()


def test_report_counts_match_the_definition(continuous: Path) -> None:
    summary = build_report(continuous).summary
    assert not summary.binary_scores
    assert summary.categories["always_correct"] == 12
    assert summary.categories["always_incorrect"] == 0
    # 36 samples have unequal rewards; a group of 8 drawn from 8 is mixed for each.
    assert summary.gate["expected_open_fraction"] == pytest.approx(36 / 60)


def test_allocate_neyman_follows_the_reward_spread(continuous: Path) -> None:
    plan = plan_rollouts(continuous, 600, zero_signal="rate").frame
    by_kind = (
        plan.with_columns(pl.col("sample_id").str.slice(-1).alias("kind"))
        .group_by("kind")
        .agg(pl.col("planned_rollouts").mean())
    )
    mean = dict(by_kind.iter_rows())
    # Uniform rewards (kind 2) spread most, then {0, .25, .5}, then {.4, .6}; the
    # constant samples (kinds 0 and 3) get the least. On the full-credit rate all of
    # kinds 0, 1, 2 and 4 looked the same (they never score 1.0).
    assert mean["2"] > mean["1"] > mean["4"] > mean["0"]
    assert mean["0"] == pytest.approx(mean["3"])
    assert (plan["reward_std"] > 0).all()  # "rate": a closed gate keeps a little
    pinned = plan_rollouts(continuous, 600, zero_signal="min").frame
    assert pinned.filter(pl.col("zero_signal"))["planned_rollouts"].max() == 2


def test_binary_runs_allocate_as_before(tmp_path: Path) -> None:
    rows = [
        (f"b{s}", r, float((s * 7 + r) % (s % 4 + 2) == 0)) for s in range(40) for r in range(8)
    ]
    path = tmp_path / "binary.parquet"
    pl.DataFrame(rows, schema=["sample_id", "rollout_idx", "score"], orient="row").write_parquet(
        path
    )
    plan = plan_rollouts(path, 400).frame
    assert plan["reward_std"].to_list() == plan["bernoulli_std"].to_list()


def test_histogram_reads_the_mean_score_on_partial_credit(
    continuous: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import curate.plots as plots

    seen: list[str] = []
    original = plots.histogram_figure

    def spy(per_sample: pl.DataFrame, **kwargs: object):  # type: ignore[no-untyped-def]
        seen.append(str(kwargs.get("column", "pass_rate")))
        return original(per_sample, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plots, "histogram_figure", spy)
    plots.plot_run(continuous, kind="histogram", output=tmp_path / "h.png")
    assert seen == ["mean_score"] and (tmp_path / "h.png").stat().st_size > 0


def test_filter_weights_std_on_partial_credit(continuous: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.jsonl"
    filter_run(FilterRequest(continuous, out, keep=["all"], weights="std"))
    rows = pl.read_ndjson(out)
    per = load_analysis(continuous).per_sample.select("sample_id", "std_dev")
    joined = rows.join(per, on="sample_id")
    assert joined["weight"].mean() == pytest.approx(1.0)
    assert joined["weight"].to_list() == pytest.approx(
        (joined["std_dev"] / joined["std_dev"].mean()).to_list()
    )
    constant = joined.filter(pl.col("sample_id").str.ends_with("-0"))
    assert (constant["weight"] == 0).all()
