"""Output edges: a reader that leaves early, a job summary that cannot be written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest


@pytest.fixture
def big_table(tmp_path: Path) -> Path:
    """Enough samples that the table and Markdown outgrow a pipe's buffer."""
    n = 3000
    frame = pl.DataFrame(
        {
            "sample_id": [f"s{i:05d}" for i in range(n) for _ in range(4)],
            "rollout_idx": [r for _ in range(n) for r in range(4)],
            # Half the samples mixed, half always incorrect: 50% learnable.
            "score": [float(i % 2 == 0 and r % 2 == 0) for i in range(n) for r in range(4)],
        }
    )
    path = tmp_path / "scores.parquet"
    frame.write_parquet(path)
    return path


def _piped_to_head(*args: object) -> tuple[int, str]:
    """Run `curate ARGS | head -c 1` for real: curate's exit status and its stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("CURATE_DEBUG", "GITHUB_STEP_SUMMARY")}
    curate = subprocess.Popen(
        [sys.executable, "-m", "curate", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert curate.stdout is not None and curate.stderr is not None
    curate.stdout.read(1)
    curate.stdout.close()  # the reader leaves, as `head` does
    err = curate.stderr.read().decode()
    return curate.wait(timeout=120), err


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_a_closed_pipe_is_not_a_failed_gate(big_table: Path, fmt: str) -> None:
    code, err = _piped_to_head("report", big_table, "--format", fmt, "--group-size", "4")
    assert code == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_failed_gate_still_fails_when_the_pipe_closes(big_table: Path) -> None:
    code, err = _piped_to_head("report", big_table, "--fail-under-signal", "0.99")
    assert code == 1
    assert "check failed: fail-under-signal" in err
    assert "Traceback" not in err


def test_an_unwritable_step_summary_is_a_named_warning(
    big_table: Path, tmp_path: Path, run_curate
) -> None:
    missing = tmp_path / "no-such-dir" / "summary.md"
    done = run_curate(
        "report", big_table, "--format", "markdown", env={"GITHUB_STEP_SUMMARY": str(missing)}
    )
    assert done.returncode == 0
    assert done.stdout.startswith("## ")
    assert f"GITHUB_STEP_SUMMARY={missing}" in done.stderr
    assert "warning" in done.stderr and "Traceback" not in done.stderr
