"""The report's length and truncation section: JSON, table and Markdown from one
function, read from token counts only (never the completion or reasoning text)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from curate.cli.app import app
from curate.evaluation.evaluate import evaluate
from curate.report.build import build_report
from curate.store.run_dir import RolloutStore
from tests.conftest import fake_eval_options


@pytest.fixture(scope="module")
def think_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 samples reasoning for 5..62 characters (tokens, for the fake backend), at
    max_tokens 50: the long reasoners are cut short."""
    root = tmp_path_factory.mktemp("lengths")
    rows, answers = [], {}
    for i in range(20):
        q = f"What is {i} + {i}?"
        rows.append({"id": f"q{i:02d}", "question": q, "answer": str(2 * i)})
        answers[q] = [f"<think>{'x' * (5 + 3 * i)}</think>{2 * i}", (i % 4) / 3]
    data = root / "think.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = root / "run"
    evaluate(fake_eval_options(data, run, answers, runs=8, max_tokens=50, grader="numeric"))
    return run


def test_json_section(think_run: Path) -> None:
    out = CliRunner().invoke(app, ["report", str(think_run), "--format", "json"])
    assert out.exit_code == 0, out.output
    lengths = json.loads(out.stdout)["lengths"]
    stored = RolloutStore(think_run).rollouts()
    assert lengths["rollouts"] == stored.height == 160
    assert lengths["truncated"] == int(stored["truncated"].sum()) > 0
    right = stored.filter(~pl.col("truncated") & (pl.col("score") == 1.0))
    assert lengths["completion_tokens"]["right"]["max"] == right["completion_tokens"].max()
    assert lengths["max_tokens"] == 50
    assert lengths["recommended_max_tokens"] <= 50
    report = json.loads(out.stdout)
    assert any("cut short" in w for w in report["warnings"])


def test_table_and_markdown_show_the_same_figures(think_run: Path) -> None:
    section = build_report(think_run).summary.extra["lengths"]
    rec = section["recommended_max_tokens"]
    table = CliRunner().invoke(app, ["report", str(think_run)], env={"COLUMNS": "200"})
    md = CliRunner().invoke(app, ["report", str(think_run), "--format", "markdown"])
    for text in (table.stdout, md.stdout):
        # One plain sentence, the same in both.
        bound = "at least " if section["recommended_is_lower_bound"] else ""
        assert f"Set max_tokens to {bound}{rec}: 99% of right answers finish within it" in text
        assert f"truncated: {section['truncated']} of 160 rollouts" in text
    assert "| completion tokens | rollouts | p50 | p90 | p99 | max |" in md.stdout
    assert "completion tokens by outcome" in table.stdout


def test_the_report_reads_no_text_column(think_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    scan, rollouts = RolloutStore.scan, RolloutStore.rollouts

    def spy_scan(self, columns=None, **kw):  # type: ignore[no-untyped-def]
        asked.extend(columns or ["*"])
        return scan(self, columns, **kw)

    def spy_rollouts(self, columns=None):  # type: ignore[no-untyped-def]
        asked.extend(columns or ["*"])
        return rollouts(self, columns)

    monkeypatch.setattr(RolloutStore, "scan", spy_scan)
    monkeypatch.setattr(RolloutStore, "rollouts", spy_rollouts)
    report = build_report(think_run, suspects=False)
    assert report.summary.extra["lengths"]["rollouts"] == 160
    assert asked and not {"completion", "reasoning", "*"} & set(asked)


def test_a_table_without_token_counts_has_no_section(tmp_path: Path) -> None:
    path = tmp_path / "s.parquet"
    pl.DataFrame({"sample_id": ["a", "a"], "score": [1.0, 0.0]}).write_parquet(path)
    assert "lengths" not in build_report(path).summary.extra


def test_a_table_with_token_counts(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    pl.DataFrame(
        {"sample_id": ["a", "a", "b"], "score": [1.0, 0.0, 1.0], "completion_tokens": [5, 9, 7]}
    ).write_csv(path)
    section = build_report(path).summary.extra["lengths"]
    assert section["truncated"] == 0 and section["recommended_max_tokens"] == 7
    assert section["max_tokens"] is None
