"""`curate allocate` end to end, and `curate filter --plan/--weights`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.store.run_dir import RolloutStore
from tests.cli.conftest import HIGH_VARIANCE
from tests.conftest import Result

ZERO_SIGNAL = ["q05", "q06", "q07", "q08", "q09", "q10", "q11"]


@pytest.mark.parametrize("suffix", ["jsonl", "parquet", "csv"])
def test_allocate_writes_a_plan_summing_to_the_budget(
    cli: Callable[..., Result], run_dir: Path, outdir: Path, suffix: str
) -> None:
    out = outdir / f"plan.{suffix}"
    result = cli("allocate", run_dir, "--budget", 100, "--zero-signal", "min", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "planned 100 rollouts over 12 samples" in result.stdout
    assert "7 zero-signal sample(s) at --min-rollouts 2" in result.stdout
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
        "--min-rollouts",
        4,
        "--max-rollouts",
        20,
        "--drop-zero-signal",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.stderr
    assert "7 zero-signal sample(s) left out" in result.stdout
    assert "x of uniform allocation over the same 5 samples at the same budget" in result.stdout
    assert "inverse-p weighs hard samples up for the log objective" in result.stdout
    plan = pl.read_ndjson(out)
    assert sorted(plan["sample_id"]) == sorted([*HIGH_VARIANCE, "q12"])
    counts = dict(plan.select("sample_id", "planned_rollouts").rows())
    assert sum(counts.values()) == 50 and max(counts.values()) <= 20 and min(counts.values()) >= 4
    assert counts["q02"] > counts["q03"]  # pass rate 1/4 vs 3/4: 1/p gives the hard one more


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--budget", "5"], "--budget 5 is below the minimum: 12 samples x --min-rollouts 2 = 24"),
        (["--budget", "0"], "--budget must be at least 1"),
        (["--budget", "500", "--max-rollouts", "10"], "above what the bounds can hold"),
        (["--budget", "50", "--min-rollouts", "-1"], "--min-rollouts must be at least 0"),
        (
            ["--budget", "50", "--min-rollouts", "3", "--max-rollouts", "2"],
            "--max-rollouts 2 is below",
        ),
        (["--budget", "50", "--drop-zero-signal", "--zero-signal", "rate"], "contradicts"),
        (["--budget", "50", "--drop-zero-signal", "--zero-signal", "min"], "contradicts"),
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
    # q11 and q12 hold partial credit: the zero-signal samples keep a shrunk reward spread.
    assert "7 zero-signal sample(s) allocated on their shrunk reward spread" in result.stdout
    plan = pl.read_parquet(out)
    assert plan["planned_rollouts"].sum() == 120
    assert plan.filter(pl.col("zero_signal"))["planned_rollouts"].min() > 2


def _proxy_ratio(stdout: str) -> float:
    """The figure of the summary's comparison line."""
    line = next(x for x in stdout.splitlines() if "gradient-variance proxy" in x)
    assert line.endswith("x of uniform allocation at the same budget (lower is better)"), line
    return float(line.split(": ")[1].split("x of")[0])


def test_allocate_default_is_rate_and_beats_uniform(
    cli: Callable[..., Result], run_dir: Path, outdir: Path
) -> None:
    """The default rule gives neyman a proxy below uniform's; min's is above it (0/1
    scores: the fixture's two partial-credit samples would switch to the reward spread)."""
    binary = RolloutStore(run_dir).rollouts().filter(~pl.col("sample_id").is_in(["q11", "q12"]))
    run = run_dir.parent / "binary.parquet"
    binary.write_parquet(run)
    default = cli("allocate", run, "-b", 120, "-o", outdir / "default.csv")
    rate = cli("allocate", run, "-b", 120, "--zero-signal", "rate", "-o", outdir / "rate.csv")
    pinned = cli("allocate", run, "-b", 120, "--zero-signal", "min", "-o", outdir / "min.csv")
    for result in (default, rate, pinned):
        assert result.exit_code == 0, result.stderr
    assert (outdir / "default.csv").read_bytes() == (outdir / "rate.csv").read_bytes()
    assert _proxy_ratio(default.stdout) < 1.0 < _proxy_ratio(pinned.stdout)
    uniform = cli("allocate", run, "-b", 120, "--method", "uniform", "-o", outdir / "u.csv")
    assert _proxy_ratio(uniform.stdout) == pytest.approx(1.0)


def test_allocate_cli_default_matches_the_library() -> None:
    from curate.allocation import DEFAULT_ZERO_SIGNAL
    from curate.cli.allocate import DEFAULT_RULE

    assert DEFAULT_RULE.value == DEFAULT_ZERO_SIGNAL


def test_drop_zero_signal_flag_alone_and_with_drop(
    cli: Callable[..., Result], run_dir: Path, outdir: Path
) -> None:
    for extra in ([], ["--zero-signal", "drop"]):
        result = cli(
            "allocate", run_dir, "-b", 50, "--drop-zero-signal", *extra, "-o", outdir / "p.csv"
        )
        assert result.exit_code == 0, result.stderr
        assert pl.read_csv(outdir / "p.csv").height == 5


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


def test_allocate_help_at_80_columns(run_curate) -> None:  # type: ignore[no-untyped-def]
    """Every option name whole, every default shown, and no seed-number wording."""
    proc = run_curate("allocate", "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    for name in ("--budget", "--output", "--method", "--zero-signal", "--drop-zero-signal"):
        assert name in text
    assert "--min-rollouts" in text and "--max-rollouts" in text and "…" not in text
    assert "[default: rate]" in text and "[default: neyman]" in text and "[default: 2]" in text
    assert "lower is better" in text and "seed" not in text.lower()


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


def test_filter_says_how_much_of_the_plan_the_kept_samples_hold(
    cli: Callable[..., Result], run_dir: Path, outdir: Path, inputs: Path
) -> None:
    """A plan over the whole run spends rollouts on samples filter drops: say how many."""
    plan = outdir / "plan.csv"
    assert cli("allocate", run_dir, "-b", 120, "-o", plan).exit_code == 0
    result = cli("filter", run_dir, "-o", outdir / "kept.jsonl", "--plan", plan)
    assert result.exit_code == 0, result.stderr
    held = pl.read_ndjson(outdir / "kept.jsonl")["planned_rollouts"].sum()
    assert 0 < held < 120
    assert f"plan: the kept samples hold {held} of its 120 rollouts" in result.stdout
    assert "not in the plan" not in result.stdout

    partial = inputs / "partial.csv"
    pl.read_csv(plan).filter(pl.col("sample_id") != "q02").write_csv(partial)
    result = cli("filter", run_dir, "-o", outdir / "kept.jsonl", "--plan", partial)
    assert result.exit_code == 0, result.stderr
    assert "note: 1 kept sample(s) are not in the plan (planned_rollouts null)" in result.stdout


def test_filter_plan_over_the_kept_samples_only_is_quiet(
    cli: Callable[..., Result], run_dir: Path, outdir: Path, inputs: Path
) -> None:
    plan = inputs / "plan.csv"
    pl.DataFrame({"sample_id": HIGH_VARIANCE, "planned_rollouts": [4, 5, 6, 7]}).write_csv(plan)
    result = cli("filter", run_dir, "-o", outdir / "kept.jsonl", "--plan", plan)
    assert result.exit_code == 0, result.stderr
    assert "plan:" not in result.stdout and "not in the plan" not in result.stdout


def test_mistyped_objective_is_a_usage_error(
    cli: Callable[..., Result], run_dir: Path, outdir: Path
) -> None:
    result = cli("filter", run_dir, "-o", outdir / "kept.jsonl", "--weights", "lgo")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "curate: error: --weights 'lgo' is neither an objective (linear, log, sqrt, arcsin, std) "
        "nor a weight table file"
    )
    assert not list(outdir.iterdir())
