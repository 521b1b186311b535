"""Fixtures for the viewer tests: two runs of the same samples (tests/view/runs.py), their
site built once by the real command, and what `curate report` and `curate compare`
print about them as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.view.runs import write_run


def curate(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m curate ARGS...` as a real process (`env` added to this one's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CURATE_DEBUG",)} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "curate", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def read_call(path: Path) -> list[Any]:
    """The arguments of the `curateView.NAME(...)` call a data script makes."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition("(")
    assert head.startswith("curateView.") and rest.endswith(");\n"), path
    return json.loads("[" + rest[: -len(");\n")] + "]")


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("view-runs")
    return (
        write_run(root / "ckpt-100", seed=1, model="ckpt-100"),
        write_run(root / "ckpt-200", seed=2, model="ckpt-200"),
    )


@pytest.fixture(scope="session")
def site(runs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of both runs, written by `curate view`."""
    out = tmp_path_factory.mktemp("view-site") / "site"
    done = curate("view", *runs, "-o", out)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def reports(runs: tuple[Path, Path]) -> list[dict[str, Any]]:
    """`curate report RUN --format json` of each run."""
    out = []
    for run in runs:
        done = curate("report", run, "--format", "json")
        assert done.returncode == 0, done.stderr
        out.append(json.loads(done.stdout))
    return out


@pytest.fixture(scope="session")
def compared(runs: tuple[Path, Path]) -> dict[str, Any]:
    done = curate("compare", *runs, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
