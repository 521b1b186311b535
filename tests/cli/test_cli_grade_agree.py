"""`curate grade`, `curate agree`, `curate eval --grader judge` and `filter --weights std`
through the CLI: output, the JSON contract, and bad input (one line, exit 2, nothing
written)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.evaluation.evaluate import evaluate
from curate.store.run_dir import RolloutStore
from tests.conftest import Result, fake_eval_options
from tests.graders.fake_judge import FakeJudge, serve_judge

pytest.importorskip("openai")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
            + "\n"
            for i in range(1, 7)
        )
    )
    return path


@pytest.fixture
def run(data: Path, tmp_path: Path) -> Path:
    answers = {f"What is {i} + {i}?": (str(2 * i), 0.2 * (i - 1)) for i in range(1, 7)}
    out = tmp_path / "run"
    evaluate(fake_eval_options(data, out, answers, runs=6, grader="numeric"))
    return out


def _one_line_exit_2(result: Result, needle: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_grade_then_agree(cli: Callable[..., Result], run: Path, tmp_path: Path) -> None:
    out = tmp_path / "regex"
    graded = cli("grade", run, "--grader", "regex:^(\\d+)$", "--out", out)
    assert graded.exit_code == 0, graded.stderr
    assert "36 rollouts" in graded.stdout and "graded with regex:^(\\d+)$ in" in graded.stdout
    assert f"next: curate agree {run} {out}" in graded.stdout
    agreed = cli("agree", run, out, "--format", "json")
    assert agreed.exit_code == 0, agreed.stderr
    body = json.loads(agreed.stdout)
    for key in (
        "first",
        "second",
        "pairs",
        "only_first",
        "only_second",
        "neither",
        "binary_scores",
        "confusion",
        "observed_agreement",
        "cohen_kappa",
        "spearman",
        "exact_agreement",
        "mean_score",
        "mean_abs_difference",
        "samples",
        "outcomes",
        "changed_samples",
    ):
        assert key in body
    assert body["first"]["grader"] == "numeric" and body["second"]["grader"] == "regex:^(\\d+)$"
    assert body["pairs"] == 36 and body["binary_scores"] is True
    table = cli("agree", run, out)
    assert "Cohen's kappa" in table.stdout and "pass/fail" in table.stdout
    markdown = cli("agree", run, out, "--format", "markdown")
    assert markdown.stdout.startswith("## curate agree")
    # Every row of the figures table has exactly its two cells (no stray pipe in a label).
    figures = [line for line in markdown.stdout.split("\n\n")[2].splitlines()]
    assert figures[0] == "| figure | value |"
    assert all(line.count("|") == 3 for line in figures)
    # One number per label: the kappa the table shows is the JSON's.
    kappa = body["cohen_kappa"]
    shown = "n/a" if kappa is None else f"{kappa:.3f}"
    assert f"| Cohen's kappa (pass/fail) | {shown} |" in markdown.stdout


def test_eval_with_a_judge_reports_its_tokens_and_resumes_from_the_cache(
    cli: Callable[..., Result], data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "judged"
    with serve_judge(FakeJudge()) as judge:
        args = [
            "eval",
            data,
            "--backend",
            "fake",
            "--model",
            "m",
            "--grader",
            "judge",
            "--judge-model",
            "jm",
            "--judge-base-url",
            judge.url,
            "--judge-price",
            "3",
            "--out",
            out,
            "--quiet",
        ]
        first = cli(*args, "-n", 2)
        assert first.exit_code == 0, first.stderr
        assert "tokens: policy" in first.stdout and "judge" in first.stdout
        assert "judge cost $" in first.stdout
        paid = judge.requests
        more = cli(*args, "-n", 3)
        assert more.exit_code == 0, more.stderr
        assert judge.requests == paid  # the fake backend repeats its completions: all cached
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judge"]["model"] == "jm"
    assert manifest["judge_options"]["api_key_env"] == "OPENAI_API_KEY"
    assert manifest["judge_usage"]["calls"] == paid
    assert manifest["judge_usage"]["cached"] > 0
    rows = RolloutStore(out).rollouts()
    assert rows.height == 18 and rows["raw_score"].is_in([2.0, 10.0]).all()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--grader", "judge"], "--judge-model"),
        (["--grader", "numeric", "--judge-model", "m"], "apply to --grader judge"),
        (["--grader", "judge", "--judge-model", "m", "--rubric", "missing.txt"], "--rubric"),
        (["--grader", "numeric", "--rubric", "r.txt"], "need --judge-model"),
        (["--grader", "judge", "--judge-model", "m", "--judge-price", "-1"], "--judge-price"),
        (
            ["--grader", "judge", "--judge-model", "m", "--judge-concurrency", "0"],
            "--judge-concurrency",
        ),
        (
            ["--grader", "judge", "--judge-model", "m", "--judge-base-url", "ftp://x"],
            "--judge-base-url",
        ),
        (["--grader", "numeric", "--score-range", "1:0"], "--score-range"),
        (["--grader", "numeric", "--grader-timeout", "0"], "--grader-timeout"),
        (["--grader", "nope"], "unknown grader"),
    ],
)
def test_grade_bad_options(
    cli: Callable[..., Result], run: Path, tmp_path: Path, extra: list[str], needle: str
) -> None:
    out = tmp_path / "out"
    _one_line_exit_2(cli("grade", run, "--out", out, *extra), needle)
    assert not out.exists() and not (tmp_path / ".out.partial").exists()


def test_grade_refuses_another_run_and_a_missing_source(
    cli: Callable[..., Result], run: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    _one_line_exit_2(cli("grade", run, "--grader", "exact", "--out", other), "--force")
    assert [p.name for p in other.iterdir()] == ["keep.txt"]
    _one_line_exit_2(
        cli("grade", tmp_path / "nope", "--grader", "exact", "--out", tmp_path / "o"),
        "no such run directory",
    )


def test_eval_judge_bad_options_write_nothing(
    cli: Callable[..., Result], data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    base = ["eval", data, "--backend", "fake", "--model", "m", "--out", out]
    _one_line_exit_2(cli(*base, "--grader", "judge"), "--judge-model")
    _one_line_exit_2(
        cli(*base, "--grader", "judge", "--judge-model", "m", "--judge-price", "-2"),
        "--judge-price",
    )
    _one_line_exit_2(cli(*base, "--judge-base-url", "http://127.0.0.1:9/v1"), "need --judge-model")
    assert not out.exists()


def test_agree_needs_shared_rollouts(cli: Callable[..., Result], run: Path, tmp_path: Path) -> None:
    table = tmp_path / "other.csv"
    pl.DataFrame({"sample_id": ["zz"], "rollout_idx": [0], "score": [1.0]}).write_csv(table)
    _one_line_exit_2(cli("agree", run, table), "in common")


def test_filter_weights_std(cli: Callable[..., Result], run: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.jsonl"
    result = cli("filter", run, "--weights", "std", "-o", out)
    assert result.exit_code == 0, result.stderr
    rows = pl.read_ndjson(out)
    per_sample = (
        RolloutStore(run)
        .rollouts()
        .group_by("sample_id")
        .agg(pl.col("score").std(ddof=0).alias("std"))
    )
    joined = rows.join(per_sample, on="sample_id")
    assert joined["weight"].mean() == pytest.approx(1.0)
    expected = joined["std"] / joined["std"].mean()
    assert joined["weight"].to_list() == pytest.approx(expected.to_list())
    zero = tmp_path / "zero.jsonl"
    _one_line_exit_2(
        cli("filter", run, "--keep", "always-incorrect", "--weights", "std", "-o", zero),
        "--weights std",
    )
    assert not zero.exists() and not (tmp_path / "zero.rejects.jsonl").exists()
