"""`curate eval --logprobs`: a bad K, window or array flag is one line and exit 2, with
nothing written (a real subprocess)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ARITHMETIC


@pytest.mark.parametrize(
    "args, message",
    [
        (["--logprobs", "0"], "--logprobs must be from 1 to 19, not 0"),
        (["--logprobs", "-3"], "--logprobs must be from 1 to 19, not -3"),
        (["--logprobs", "50"], "--logprobs must be from 1 to 19, not 50"),
        (["--logprobs", "4", "--confidence-window", "0"], "--confidence-window must be"),
        (["--keep-token-logprobs"], "--keep-token-logprobs needs --logprobs K"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_bad_logprob_options_are_one_line(
    run_curate: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    args: list[str],
    message: str,
    dry_run: bool,
) -> None:
    # A dry run refuses what the run would refuse: it never describes a run that cannot start.
    out = tmp_path / "run"
    extra = ["--dry-run"] if dry_run else []
    result = run_curate(
        "eval", ARITHMETIC, "--model", "fake-model", "--backend", "fake", "-o", out, *args, *extra
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr
    assert not out.exists()
