"""`curate eval --grader code` end to end (fake backend, real sandboxed programs): a
HumanEval-layout file just works, the start lines name the layout and the sandbox, the
manifest records the scoring, and bad code-grading options are one line, exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.evaluation.evaluate import evaluate
from curate.store.run_dir import RolloutStore
from tests.conftest import ROOT, Result, fake_eval_options

HUMANEVAL = ROOT / "sample_data" / "humaneval_layout.jsonl"


def _eval(out: Path, *extra: object) -> list[object]:
    return ["eval", HUMANEVAL, "--model", "fake-model", "--backend", "fake", "--out", out, *extra]


def test_a_humaneval_layout_file_is_graded_by_running_the_programs(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in HUMANEVAL.read_text().splitlines()]
    # The fake model writes the canonical body half the time, else that body with a
    # stray "9" appended (a NameError or a SyntaxError when run).
    answers = {row["prompt"]: (row["canonical_solution"].rstrip(), 0.5) for row in rows}
    out = tmp_path / "run"
    outcome = evaluate(
        fake_eval_options(HUMANEVAL, out, answers, grader="code", runs=6, code_score="fraction")
    )
    assert outcome.result is not None and outcome.result.errors == 0
    frame = RolloutStore(out).rollouts(["sample_id", "score", "extracted", "error"])
    assert frame.height == 24 and frame["error"].null_count() == 24
    passed = frame.filter(pl.col("score") == 1.0)
    failed = frame.filter(pl.col("score") == 0.0)
    assert passed.height + failed.height == 24 and passed.height > 0 and failed.height > 0
    assert set(passed["extracted"]) == {"1/1 passed"}
    assert all("crashed 1" in text for text in failed["extracted"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["grader"] == "code:score=fraction"
    assert manifest["answer_field"] == "test"
    assert manifest["reference_check"]["bad"] == 0
    notes = manifest["grader_notes"]
    assert notes[0].startswith("code tests: HumanEval")
    assert notes[2].startswith("code verdict: tests run in a judge box")
    assert notes[3].startswith("code sandbox: ")


def test_dry_run_start_lines_say_which_layout_and_which_sandbox(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = cli(*_eval(out, "--grader", "code", "--dry-run"))
    assert res.exit_code == 0, res.stderr
    text = res.stderr
    assert "references: the tests as given, 4 in all" in text
    assert "code tests: HumanEval (test + entry_point, check(candidate)) in 4 of 4" in text
    assert "code sandbox: " in text and "code limits per case: 10s wall" in text
    assert "check: grader 'code' accepts all 4 references" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--grader", "code", "--code-score", "half"], "--code-score 'half': expected one of"),
        (["--grader", "exact", "--code-score", "fraction"], "--code-score applies to --grader"),
        (["--grader", "code", "--grader-workers", "0"], "--grader-workers 0: expected at least 1"),
        (["--grader", "code:memory_mb=lots"], "memory_mb must be a positive whole number"),
        (["--grader", "code:colour=red"], "expected code or code:KEY=VALUE"),
        (["--grader", "code", "--score-range", "0:10"], "a score range applies to"),
    ],
)
def test_bad_code_grading_options_are_one_line_and_write_nothing(
    cli: Callable[..., Result], tmp_path: Path, extra: list[str], needle: str
) -> None:
    out = tmp_path / "run"
    for dry in ([], ["--dry-run"]):
        res = cli(*_eval(out, *extra, *dry))
        assert res.exit_code == 2, res.stderr
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and needle in lines[0], res.stderr
        assert "Traceback" not in res.stderr
        assert not out.exists()
