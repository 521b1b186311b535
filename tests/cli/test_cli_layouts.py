"""`curate layouts`, `--layout`, and `curate eval --help` at 80 columns."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from curate.data.layouts import LAYOUTS
from curate.store.run_dir import RolloutStore
from tests.conftest import ROOT, Result

MMLU = ROOT / "sample_data" / "mmlu_layout.jsonl"


def test_layouts_lists_every_layout_with_its_fields_at_80_columns(
    cli: Callable[..., Result],
) -> None:
    res = cli("layouts")
    assert res.exit_code == 0, res.stderr
    heads = [line for line in res.stdout.splitlines() if not line.startswith(" ")]
    names = [line.split(" ", 1)[0] for line in heads[: len(LAYOUTS.names())]]
    assert names == LAYOUTS.names()
    assert "mmlu (multiple choice; grader: choice)" in res.stdout
    assert "  fields: question: str, choices: list[str], answer: int index" in res.stdout
    assert all(len(line) <= 80 for line in res.stdout.splitlines())


def test_layout_forces_checks_and_can_be_switched_off(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    base = ["eval", MMLU, "--model", "fake-model", "--backend", "fake", "--dry-run"]
    res = cli(*base, "--layout", "mmlu")
    assert res.exit_code == 0, res.stderr
    head = "layout: mmlu (multiple choice; --layout: question, choices, answer)"
    assert res.stderr.startswith(head)
    # No layout: the generic names, and the sanity check names the likely fix.
    res = cli(*base, "--layout", "none")
    assert res.exit_code == 0, res.stderr
    assert res.stderr.startswith("layout: --layout none; fields by name: question, answer")
    assert "warning: the references in 'answer' look like indices into 'choices'" in res.stderr
    # A layout the file does not fit, and a name that is not one: one line, exit 2.
    res = cli(*base, "--layout", "gpqa")
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "--layout gpqa: the data does not have" in res.stderr
    res = cli(*base, "--layout", "mmlu_pro")
    assert res.exit_code == 2 and "did you mean 'mmlu-pro'" in res.stderr


def test_the_layout_is_recorded_and_a_changed_layout_refuses_a_resume(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    base = ["eval", MMLU, "--model", "fake-model", "--backend", "fake", "-n", 1, "--out", out]
    res = cli(*base)
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["layout"] == "mmlu" and manifest["grader"] == "choice"
    res = cli(*base, "--layout", "none")
    assert res.exit_code == 2 and "layout 'mmlu' -> None" in res.stderr


def test_a_humaneval_file_with_defaults_picks_the_code_grader_and_a_solution_is_refused(
    cli: Callable[..., Result],
) -> None:
    base = ["eval", ROOT / "sample_data" / "humaneval_layout.jsonl", "--model", "fake-model"]
    res = cli(*base, "--backend", "fake", "--dry-run")
    assert res.exit_code == 0, res.stderr
    assert "grader: code (the humaneval layout's grader)" in res.stderr
    res = cli(*base, "--backend", "fake", "--dry-run", "--answer-field", "canonical_solution")
    assert res.exit_code == 2
    assert "holds a solution: name the tests column" in res.stderr
    assert "--max-bad-references" not in res.stderr


def test_eval_help_reads_at_80_columns(cli: Callable[..., Result]) -> None:
    text = cli("eval", "--help", env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"}).stdout
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    grading = next(i for i, line in enumerate(lines) if "─ Grading " in line)
    assert "--grader " in lines[grading + 1]  # the option a user needs first
    # Metavars are one short word each: none is split over two lines.
    metavars = re.findall(r"│ --[a-z-]+(?: +-\w)? +([A-Z][A-Z:/|]*) ", text)
    assert metavars and all(len(m) <= 8 for m in metavars), metavars
    assert "exclu" not in text.replace("exclude", "")
    # The help column is about 40 characters wide, not 24.
    (line,) = [line for line in lines if line.startswith("│ --grader ")]
    assert len(line) - line.index("exact, numeric") - 2 >= 36


def test_a_run_read_with_a_layout_is_regraded_with_the_same_references(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    run, again = tmp_path / "run", tmp_path / "again"
    res = cli("eval", MMLU, "--model", "fake-model", "--backend", "fake", "-n", 2, "--out", run)
    assert res.exit_code == 0, res.stderr
    # `curate grade` reads the references through the run's layout: letters, not indices.
    res = cli("grade", run, "--grader", "choice", "--out", again)
    assert res.exit_code == 0, res.stderr
    scores = RolloutStore(again).rollouts(["error"])
    assert scores["error"].null_count() == scores.height
