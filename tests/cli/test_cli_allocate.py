"""`curate allocate` end to end, and `curate filter --plan/--weights`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from tests.cli.conftest import HIGH_VARIANCE
from tests.conftest import Result

ZERO_SIGNAL = ["q05", "q06", "q07", "q08", "q09", "q10", "q11"]


@pytest.mark.parametrize("suffix", ["jsonl", "parquet", "csv"])
def test_allocate_writes_a_plan_summing_to_the_budget(
    cli: Callable[..., Result], run_dir: Path, outdir: Path, suffix: str
) -> None:
    out = outdir / f"plan.{suffix}"
    result = cli("allocate", run_dir, "--budget", 100, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "planned 100 rollouts over 12 samples" in result.stdout
    assert "7 zero-signal sample(s) at --min-runs 2" in result.stdout
    plan = {"jsonl": pl.read_ndjson, "parquet": pl.read_parquet, "csv": pl.read_csv}[suffix](out)
    assert plan["planned_rollouts"].sum() == 100
    assert {"sample_id", "planned_rollouts", "pass_rate", "smoothed_pass_rate"} <= set(plan.columns)
    zero = plan.filter(pl.col("sample_id").is_in(ZERO_SIGNAL))
    assert zero["planned_rollouts"].to_list() == [2] * len(ZERO_SIGNAL)


def test_allocate_methods_and_drop(cli: Callable[..., Result], run_dir: Path, outdir: Path) -> None:
    out = outdir / "plan.jsonl"
    result = cli(
        "allocate",
        run_dir,
        "-b",
        50,
        "--method",
        "inverse-p",
        "--min-runs",
        4,
        "--max-runs",
        20,
        "--drop-zero-signal",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.stderr
    assert "7 sample(s) left out (zero signal)" in result.stdout
    plan = pl.read_ndjson(out)
    assert sorted(plan["sample_id"]) == sorted([*HIGH_VARIANCE, "q12"])
    counts = dict(plan.select("sample_id", "planned_rollouts").rows())
    assert sum(counts.values()) == 50 and max(counts.values()) <= 20 and min(counts.values()) >= 4
    assert counts["q02"] > counts["q03"]  # pass rate 1/4 vs 3/4: 1/p gives the hard one more


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--budget", "5"], "--budget 5 is below the minimum: 12 samples x --min-runs 2 = 24"),
        (["--budget", "0"], "--budget must be at least 1"),
        (["--budget", "500", "--max-runs", "10"], "above what the bounds can hold"),
        (["--budget", "50", "--min-runs", "-1"], "--min-runs must be at least 0"),
        (["--budget", "50", "--min-runs", "3", "--max-runs", "2"], "--max-runs 2 is below"),
        (["--budget", "50", "--drop-zero-signal", "--zero-signal", "rate"], "contradicts"),
    ],
)
def test_allocate_errors_are_one_line_exit_2(
    cli: Callable[..., Result], run_dir: Path, outdir: Path, args: list[str], needle: str
) -> None:
    result = cli("allocate", run_dir, *args, "-o", outdir / "plan.jsonl")
    assert result.exit_code == 2, result.stdout
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not list(outdir.iterdir())


def test_allocate_zero_signal_by_rate(
    cli: Callable[..., Result], run_dir: Path, outdir: Path
) -> None:
    out = outdir / "plan.parquet"
    result = cli("allocate", run_dir, "-b", 120, "--zero-signal", "rate", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "zero-signal" not in result.stdout
    plan = pl.read_parquet(out)
    assert plan["planned_rollouts"].sum() == 120
    assert plan.filter(pl.col("zero_signal"))["planned_rollouts"].min() > 2


def test_allocate_input_errors(cli: Callable[..., Result], run_dir: Path, outdir: Path) -> None:
    cases = [
        (["allocate", outdir / "nope", "-b", 10, "-o", outdir / "p.jsonl"], "no such file"),
        (["allocate", run_dir, "-b", 10, "-o", outdir / "p.xlsx"], "unknown table format"),
    ]
    for args, needle in cases:
        result = cli(*args)
        assert result.exit_code == 2
        lines = [x for x in result.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not list(outdir.iterdir())


def test_allocate_help_lists_methods(cli: Callable[..., Result]) -> None:
    result = cli("allocate", "--help")
    assert result.exit_code == 0
    assert "neyman" in result.stdout and "inverse-p" in result.stdout


def test_filter_joins_the_plan_and_weights(
    cli: Callable[..., Result], run_dir: Path, outdir: Path
) -> None:
    plan = outdir / "plan.csv"
    assert cli("allocate", run_dir, "-b", 60, "--drop-zero-signal", "-o", plan).exit_code == 0
    out = outdir / "kept.jsonl"
    result = cli("filter", run_dir, "-o", out, "--plan", plan, "--weights", "log")
    assert result.exit_code == 0, result.stderr
    kept = pl.read_ndjson(out)
    assert sorted(kept["sample_id"]) == HIGH_VARIANCE
    planned = dict(pl.read_csv(plan).select("sample_id", "planned_rollouts").rows())
    for sid, n in kept.select("sample_id", "planned_rollouts").rows():
        assert n == planned[sid]
    assert kept["weight"].mean() == pytest.approx(1.0)
    by = dict(kept.select("sample_id", "weight").rows())
    assert by["q02"] > by["q03"]  # the log objective weighs the harder sample up


def test_filter_weight_and_plan_errors(
    cli: Callable[..., Result], run_dir: Path, outdir: Path, inputs: Path
) -> None:
    bad_plan = inputs / "bad.csv"
    bad_plan.write_text("sample_id,n\nq01,3\n")
    cases = [
        (["--weights", "log", "--weight-delta", "0.7"], "--weight-delta must be in (0, 0.5)"),
        (["--plan", bad_plan], "missing column(s) planned_rollouts"),
        (["--plan", inputs / "missing.csv"], "no such file"),
    ]
    for extra, needle in cases:
        result = cli("filter", run_dir, "-o", outdir / "kept.jsonl", *extra)
        assert result.exit_code == 2, (extra, result.stdout)
        lines = [x for x in result.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not list(outdir.iterdir())
