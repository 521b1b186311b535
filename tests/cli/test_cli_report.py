"""`curate report`: formats, options, CI checks and the GitHub job summary."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.report.goldens import DATA, GOLDEN, assert_json_close, update_golden

from .conftest import HIGH_VARIANCE, SCORES


def report_json(cli, *args: object) -> dict:
    result = cli("report", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("source", ["scores_csv", "scores_parquet", "run_dir"])
def test_report_json_on_every_input(cli, request, source: str) -> None:
    path = request.getfixturevalue(source)
    data = report_json(cli, path)
    assert data["samples"] == len(SCORES)
    assert data["rollouts"] == 4 * len(SCORES)
    assert data["errors"] == 1
    assert data["categories"] == {
        "always_correct": 3,
        "always_incorrect": 3,
        "high_variance": len(HIGH_VARIANCE),
        "low_variance": 2,
    }
    assert data["high_variance_fraction"] == pytest.approx(4 / 12)
    assert data["source"] == str(path)
    assert data["passed"] is True


def test_every_command_survives_a_table_where_every_rollout_failed(
    cli, inputs: Path, outdir: Path
) -> None:
    table = inputs / "failed.csv"
    table.write_text("sample_id,score,error\na,,timeout\na,,timeout\nb,,refused\n")
    data = report_json(cli, table)
    assert (data["samples"], data["unscored_samples"], data["errors"]) == (0, 2, 3)
    assert data["mean_score"] is None
    assert data["warnings"] == ["no sample has a scored rollout"]
    assert cli("report", table).exit_code == 0
    assert cli("report", table, "--max-error-rate", "0.5").exit_code == 1
    # Nothing to keep: an error (exit 1) naming why, unless an empty export is asked for.
    result = cli("filter", table, "-o", outdir / "k.jsonl")
    assert result.exit_code == 1 and "2 no scored rollouts" in result.stderr
    result = cli("filter", table, "-o", outdir / "k.jsonl", "--allow-empty")
    assert result.exit_code == 0, result.stderr
    assert "no scored rollouts" in result.stdout


def test_report_options_reach_the_statistics(cli, scores_csv: Path) -> None:
    data = report_json(cli, scores_csv, "--threshold", "0.2", "--group-size", "4")
    assert data["threshold"] == 0.2
    assert data["gate"]["group_size"] == 4
    # Variances: q01 0.25, q02 0.1875, q03 0.1875, q04 (2 of 3) 0.222: only q01 and q04 > 0.2.
    assert data["categories"]["high_variance"] == 2
    assert data["categories"]["low_variance"] == 4


def test_report_table(cli, scores_csv: Path) -> None:
    result = cli("report", scores_csv, env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for text in (
        "curate report",
        "samples",
        "best-of-N",
        "high variance (learnable)",
        "pass@k",
        "compute multiplier",
    ):
        assert text in out, text
    assert "\x1b[" not in out  # no colour codes when not writing to a terminal
    assert result.stderr == ""


def test_report_markdown(cli, scores_csv: Path) -> None:
    result = cli("report", scores_csv, "--format", "markdown")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"## curate report: `{scores_csv}`")
    assert "| metric | value |" in result.stdout
    assert "| high variance (learnable) | 4 | 33.3% |" in result.stdout


def test_github_step_summary_is_appended(cli, scores_csv: Path, tmp_path: Path) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("# earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    first = cli("report", scores_csv, "--format", "markdown", env=env)
    assert first.exit_code == 0
    assert summary.read_text() == "# earlier step\n" + first.stdout
    cli("report", scores_csv, "--format", "markdown", env=env)
    assert summary.read_text() == "# earlier step\n" + first.stdout * 2


def test_github_step_summary_only_for_markdown(cli, scores_csv: Path, tmp_path: Path) -> None:
    summary = tmp_path / "step_summary.md"
    cli("report", scores_csv, "--format", "json", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert not summary.exists()


# ---------------------------------------------------------------- gates


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_gate_fail_under_signal(cli, scores_csv: Path, fmt: str) -> None:
    result = cli("report", scores_csv, "--format", fmt, "--fail-under-signal", "0.5")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "curate: check failed: fail-under-signal: high-variance share 33.3% < required 50.0%"
    ]
    assert result.stdout  # the report is still printed
    if fmt == "json":
        data = json.loads(result.stdout)
        assert data["passed"] is False
        assert data["gates"] == [
            {
                "name": "fail-under-signal",
                "passed": False,
                "message": "high-variance share 33.3% < required 50.0%",
            }
        ]


def test_gate_max_error_rate(cli, scores_csv: Path) -> None:
    result = cli("report", scores_csv, "--format", "json", "--max-error-rate", "0.01")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "curate: check failed: max-error-rate: error rate 2.08% (1 of 48 rollouts) > allowed 1.00%"
    ]


def test_both_gates_fail(cli, scores_csv: Path) -> None:
    result = cli(
        "report", scores_csv, "--fail-under-signal", "0.9", "--max-error-rate", "0", "-f", "json"
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert [line.split(":")[2].strip() for line in lines] == ["fail-under-signal", "max-error-rate"]


def test_gates_pass(cli, scores_csv: Path) -> None:
    result = cli(
        "report",
        scores_csv,
        "--format",
        "markdown",
        "--fail-under-signal",
        "0.3",
        "--max-error-rate",
        "0.05",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert "**Checks passed**" in result.stdout
    assert "`fail-under-signal`" in result.stdout and "`max-error-rate`" in result.stdout


def test_gate_boundaries_are_inclusive(cli, scores_csv: Path) -> None:
    # share 4/12 >= 4/12 passes; error rate 1/48 <= 1/48 passes.
    result = cli(
        "report",
        scores_csv,
        "-f",
        "json",
        "--fail-under-signal",
        repr(4 / 12),
        "--max-error-rate",
        repr(1 / 48),
    )
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("option", ["--fail-under-signal", "--max-error-rate"])
@pytest.mark.parametrize("value", ["1.5", "-0.1", "lots"])
def test_gate_option_out_of_range_is_a_usage_error(cli, scores_csv: Path, option, value) -> None:
    result = cli("report", scores_csv, option, value)
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr


def test_gates_in_a_real_process(run_curate, scores_csv: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    proc = run_curate(
        "report",
        scores_csv,
        "--format",
        "markdown",
        "--fail-under-signal",
        "0.5",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "curate: check failed: fail-under-signal: high-variance share 33.3% < required 50.0%"
    ]
    assert "**Checks FAILED**" in proc.stdout
    assert summary.read_text(encoding="utf-8") == proc.stdout
    ok = run_curate("report", scores_csv, "--format", "json", "--fail-under-signal", "0.25")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True


# ---------------------------------------------------------------- golden output via the CLI


@pytest.mark.skipif(update_golden(), reason="regenerating golden files")
@pytest.mark.parametrize(
    ("fmt", "golden", "args"),
    [
        ("markdown", "scores_small.md", []),
        ("json", "scores_small.json", []),
        ("table", "scores_small.txt", []),
        (
            "markdown",
            "scores_small.gates.md",
            ["--fail-under-signal", "0.5", "--max-error-rate", "0.05"],
        ),
        (
            "json",
            "scores_small.gates.json",
            ["--fail-under-signal", "0.5", "--max-error-rate", "0.05"],
        ),
    ],
)
def test_cli_output_matches_golden(
    cli, monkeypatch, fmt: str, golden: str, args: list[str]
) -> None:
    monkeypatch.chdir(DATA)
    result = cli("report", "scores_small.csv", "--format", fmt, *args, env={"COLUMNS": "100"})
    assert result.exit_code == (1 if args else 0)
    want = (GOLDEN / golden).read_text(encoding="utf-8")
    if fmt == "json":
        assert_json_close(json.loads(result.stdout), json.loads(want))
    else:
        assert result.stdout == want


# ------------------------------------------------------- errors, groups, typos, layout


def test_a_typo_in_a_run_directory_is_named_as_missing(cli, inputs: Path) -> None:
    result = cli("report", inputs / "runs" / "my-rnu")
    assert result.exit_code == 2
    assert "no such file or run directory" in result.stderr
    assert "unknown table format" not in result.stderr


def test_report_shows_the_errors_of_failed_rollouts(cli, inputs: Path) -> None:
    table = inputs / "failed.csv"
    table.write_text(
        "sample_id,score,error\na,,HTTP 429: rate limited\na,,HTTP 429: rate limited\n"
        "b,,connection refused\nc,1,\n"
    )
    data = report_json(cli, table)
    assert data["top_errors"] == [
        {"error": "HTTP 429: rate limited", "count": 2},
        {"error": "connection refused", "count": 1},
    ]
    table_out = cli("report", table).stdout
    assert "HTTP 429: rate limited" in table_out and "top errors" in table_out
    md = cli("report", table, "--format", "markdown").stdout
    assert "| HTTP 429: rate limited | 2 |" in md


def test_report_breaks_figures_down_by_data_source(cli, inputs: Path) -> None:
    """A run directory's samples.parquet gives each sample its data_source."""
    from curate.store.run_dir import RolloutStore

    from .conftest import original_samples, score_frame

    store = RolloutStore(inputs / "run")
    store.create()
    store.write_manifest({"model": "unit-test"})
    sources = ["gsm8k" if i < 8 else "math" for i in range(len(SCORES))]
    store.write_samples(original_samples().with_columns(pl.Series("data_source", sources)))
    store.append(score_frame())
    data = report_json(cli, store.run_dir)
    assert data["group_by"] == "data_source"
    rows = {row["group"]: row for row in data["by_group"]}
    assert [row["group"] for row in data["by_group"]] == ["gsm8k", "math"]  # most samples first
    assert rows["gsm8k"]["samples"] == 8 and rows["math"]["samples"] == 4
    assert rows["gsm8k"]["errors"] == 1 and rows["math"]["errors"] == 0  # q04's failure
    # q01-q04 are high variance, all in gsm8k; math holds q09-q12.
    assert rows["gsm8k"]["high_variance_fraction"] == pytest.approx(4 / 8)
    assert rows["math"]["high_variance_fraction"] == 0.0
    assert rows["math"]["mean_score"] == pytest.approx((0 + 0 + 0.5 + 0.225) / 4)
    pooled = sum(r["samples"] * r["expected_open_fraction"] for r in rows.values()) / 12
    assert pooled == pytest.approx(data["gate"]["expected_open_fraction"], abs=1e-5)
    table = cli("report", store.run_dir).stdout
    assert "by data_source" in table and "gsm8k" in table
    md = cli("report", store.run_dir, "--format", "markdown").stdout
    assert "| data_source | samples | mean score |" in md and "| gsm8k | 8 |" in md


def test_group_by_a_column_of_the_score_table(cli, inputs: Path) -> None:
    from .conftest import score_frame

    path = inputs / "scores.parquet"
    frame = score_frame().with_columns(
        pl.when(pl.col("sample_id") < "q07")
        .then(pl.lit("easy"))
        .otherwise(pl.lit("hard"))
        .alias("level")
    )
    frame.write_parquet(path)
    data = report_json(cli, path, "--group-by", "level")
    assert data["group_by"] == "level"
    assert {r["group"]: r["samples"] for r in data["by_group"]} == {"easy": 6, "hard": 6}
    # Without --group-by and without a data_source column: no breakdown.
    plain = report_json(cli, path)
    assert plain["group_by"] is None and plain["by_group"] == []
    missing = cli("report", path, "--group-by", "nope")
    assert missing.exit_code == 2
    assert "no column 'nope' to group by" in missing.stderr


def test_json_floats_are_rounded_and_typed(cli, scores_csv: Path) -> None:
    data = report_json(cli, scores_csv)

    def floats(value):
        if isinstance(value, float):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from floats(v)
        elif isinstance(value, list):
            for v in value:
                yield from floats(v)

    assert all(len(f"{f:.15g}".lstrip("-0.").replace(".", "")) <= 6 for f in floats(data))
    m = data["compute_multiplier"]
    assert isinstance(m["recommended"], int)
    assert set(m["rule_of_thumb"]) == {"low", "high"}
    assert all(v is None or isinstance(v, int) for v in m["rule_of_thumb"].values())
    assert isinstance(m["rule_of_thumb_text"], str)
    assert m["recommended_group_size"] == m["recommended"] * m["group_size"]


@pytest.mark.parametrize("rows", ["half", "rare", "none"])
def test_multiplier_lines_fit_80_columns(cli, inputs: Path, rows: str) -> None:
    """The multiplier prints as short lines of its own, whatever it recommends."""
    table = inputs / "s.csv"
    lines = ["sample_id,score"]
    for i in range(60):
        if rows == "half":  # mixed at G = 8 already: keep the group size
            scores = [1, 0] * 4
        elif rows == "rare":  # a few passes: larger groups keep opening
            scores = [1 if i % 2 == 0 and r == 0 else 0 for r in range(8)]
        else:  # nothing mixes: the rule of thumb has no range
            scores = [0] * 8
        lines += [f"s{i},{s}" for s in scores]
    table.write_text("\n".join(lines) + "\n")
    out = cli("report", table, env={"COLUMNS": "80"}).stdout
    start = out.index("compute multiplier")
    block = out[start:].splitlines()[:4]
    assert all(len(line) <= 80 for line in out.splitlines()), out
    # One recommendation on the terminal: the rule of thumb is never a second one.
    assert len(block) >= 3 and "rule of thumb" not in out and "seed" not in out


# ---------------------------------------------------------------- suspect labels


@pytest.fixture
def suspect_run(inputs: Path) -> Path:
    from tests.report.suspect_run import write_suspect_run

    return write_suspect_run(inputs / "suspects")


def test_report_line_on_suspect_labels(cli, suspect_run: Path) -> None:
    result = cli("report", suspect_run, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    # One line even at 80 columns: the command in it stays whole for copy and paste.
    assert (
        f"suspect labels: 3 samples (majority answer graded wrong); "
        f"list: curate report {suspect_run} --show suspects"
    ) in result.stdout.splitlines()
    data = report_json(cli, suspect_run)
    assert data["suspect_labels"] == {
        "count": 3,
        "close_misses": 0,
        "min_share": 0.6,
        "min_n": 4,
        "reason": None,
    }


def test_show_suspects_in_every_format(cli, suspect_run: Path) -> None:
    from tests.report.suspect_run import SUSPECTS

    table = cli("report", suspect_run, "--show", "suspects", env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.stderr
    for text in ("sample_id", "reference", "majority answer", "bad1", "41", "42", "87.5%"):
        assert text in table.stdout, text
    assert "compute multiplier" not in table.stdout  # the list replaces the summary
    assert "hard1" not in table.stdout and "ok1" not in table.stdout

    md = cli("report", suspect_run, "--show", "suspects", "--format", "markdown")
    assert md.exit_code == 0, md.stderr
    assert "| bad1 | 41 | 42 | 87.5% | 8 |" in md.stdout.splitlines()
    assert "| bad3 | London | paris | 75.0% | 8 |" in md.stdout.splitlines()

    data = json.loads(cli("report", suspect_run, "--show", "suspects", "--format", "json").stdout)
    assert [s["sample_id"] for s in data["suspects"]] == SUSPECTS
    assert [s["reference"] for s in data["suspects"]] == ["41", "100", "London"]
    assert data["suspect_labels"]["count"] == 3


def test_show_suspects_without_answers_says_why(cli, scores_csv: Path) -> None:
    result = cli("report", scores_csv, "--show", "suspects")
    assert result.exit_code == 0, result.stderr
    assert "no suspect-label check" in result.stdout
    assert "needs extracted answers" in result.stdout
    data = json.loads(cli("report", scores_csv, "--show", "suspects", "-f", "json").stdout)
    assert data["suspects"] == [] and data["suspect_labels"]["count"] is None
    # The summary of such input is as it was: no suspect line, no JSON key.
    assert "suspect labels" not in cli("report", scores_csv).stdout
    assert "suspect_labels" not in report_json(cli, scores_csv)


def test_bad_show_value_is_a_usage_error(cli, suspect_run: Path) -> None:
    result = cli("report", suspect_run, "--show", "suspect")
    assert result.exit_code == 2
    assert result.stdout == ""
