"""The report's token-confidence section: JSON, table and Markdown from one section, shown
only for a run made with --logprobs; and the length section's count of how token counts
were made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curate.cli.app import app
from curate.evaluation.evaluate import evaluate
from curate.report.build import build_report
from curate.report.render import token_count_line
from tests.conftest import fake_eval_options


def _run(root: Path, **fields: object) -> Path:
    rows, answers = [], {}
    for i in range(12):
        q = f"What is {i} + {i}?"
        rows.append({"id": f"q{i:02d}", "question": q, "answer": str(2 * i)})
        answers[q] = [str(2 * i), (i % 4 + 0.5) / 4]
    data = root / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = root / "run"
    settings: dict[str, object] = {"runs": 8, "grader": "numeric", **fields}
    evaluate(fake_eval_options(data, run, answers, **settings))
    return run


@pytest.fixture(scope="module")
def confident_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("conf"), logprobs=4, confidence_window=1)


def test_json_table_and_markdown_show_one_section(confident_run: Path) -> None:
    section = build_report(confident_run).summary.extra["confidence"]
    assert section["rollouts"] == 96 and section["logprobs"] == 4 and section["window"] == 1
    out = CliRunner().invoke(app, ["report", str(confident_run), "--format", "json"])
    assert json.loads(out.stdout)["confidence"]["rollouts"] == 96
    lowest = section["measures"]["confidence_lowest_group"]
    table = CliRunner().invoke(app, ["report", str(confident_run)], env={"COLUMNS": "200"})
    md = CliRunner().invoke(app, ["report", str(confident_run), "--format", "markdown"])
    for text in (table.stdout, md.stdout):
        assert "lowest group confidence" in text and f"{lowest['auroc']:.3f}" in text
        assert "early stop keeping 10%" in text


def test_no_section_without_logprobs(tmp_path: Path) -> None:
    run = _run(tmp_path)
    assert "confidence" not in build_report(run).summary.extra
    md = CliRunner().invoke(app, ["report", str(run), "--format", "markdown"])
    assert "confidence" not in md.stdout
    # The fake backend's counts are exact: the length section says nothing more.
    counts = build_report(run).summary.extra["lengths"]["token_counts"]
    assert counts == {"exact": 96, "tokenizer": 0, "estimated": 0, "unknown": 0}


def test_the_length_section_says_when_counts_are_approximate() -> None:
    assert token_count_line({"exact": 5, "tokenizer": 0, "estimated": 0, "unknown": 0}) is None
    line = token_count_line({"exact": 5, "tokenizer": 0, "estimated": 3, "unknown": 0})
    assert line is not None and "5 exact, 3 estimated" in line and "approximate" in line
