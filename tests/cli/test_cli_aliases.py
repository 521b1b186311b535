"""Option spellings renamed since an earlier release (`--runs` -> `--rollouts`) still work
on the command line, and `--help` shows only today's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from curate.cli.aliases import RENAMED_OPTIONS, current_spellings

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_old_spellings_are_rewritten_for_their_command_only() -> None:
    assert current_spellings(["eval", "d.jsonl", "--runs", "4"]) == [
        "eval",
        "d.jsonl",
        "--rollouts",
        "4",
    ]
    assert current_spellings(["eval", "--max-runs=6"]) == ["eval", "--max-rollouts=6"]
    assert current_spellings(["allocate", "r", "--min-runs", "2"])[2] == "--min-rollouts"
    # another command, a value that looks like an option after `--`, a global flag first
    assert current_spellings(["compare", "--runs"]) == ["compare", "--runs"]
    assert current_spellings(["eval", "--", "--runs"]) == ["eval", "--", "--runs"]
    assert current_spellings(["--version", "eval", "--runs", "2"])[2] == "--rollouts"
    assert current_spellings([]) == []


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curate", *args], capture_output=True, text=True, env=ENV, cwd=ROOT
    )


def test_the_old_and_new_spelling_give_the_same_dry_run(tmp_path: Path) -> None:
    common = ["eval", "sample_data/arithmetic.jsonl", "--backend", "fake", "-m", "m", "--dry-run"]
    old = _run(*common, "--runs", "3", "-o", str(tmp_path / "a"))
    new = _run(*common, "--rollouts", "3", "-o", str(tmp_path / "a"))
    assert old.returncode == new.returncode == 0, old.stderr + new.stderr
    assert old.stdout == new.stdout
    assert "x 3 rollouts" in new.stdout


def test_help_shows_only_current_spellings() -> None:
    for command, renames in RENAMED_OPTIONS.items():
        out = _run(command, "--help").stdout
        for old, new in renames.items():
            assert new in out, (command, new)
            assert f"{old} " not in out and f"{old}\n" not in out, (command, old)
