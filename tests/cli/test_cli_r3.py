"""`--grader r3` end to end as real processes (slow): the open-ended sample set
(sample_data/open_ended.jsonl: reference answers of a sentence, no verifier) evaluated by
the bundled reasoning model through a loopback `vllm serve`, then reported, filtered and
plotted like any continuous reward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, TINY_THINK

pytestmark = pytest.mark.slow

OPEN_ENDED = ROOT / "sample_data" / "open_ended.jsonl"


def test_open_ended_set_end_to_end(run_curate: Any, tiny_think_server: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["eval", OPEN_ENDED, "--model", TINY_THINK, "--backend", "openai"]
    args += ["--base-url", tiny_think_server.base_url, "--grader", "r3", "-n", "4"]
    args += ["--max-tokens", "48", "-o", run]
    first = run_curate(*args)
    assert first.returncode == 0, first.stderr
    assert "r3: " in first.stdout and "prefills of" in first.stdout
    # A resume generates and prefills nothing.
    again = run_curate(*args)
    assert again.returncode == 0, again.stderr
    assert "0 new rollouts" in again.stdout and "prefills of" not in again.stdout

    report = run_curate("report", run, "-f", "json")
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["samples"] == 20 and summary["rollouts"] == 80 and summary["errors"] == 0
    assert 0.0 <= summary["mean_score"] <= 1.0

    shown = run_curate("report", run, "--show", "reflective", "-f", "json")
    assert shown.returncode == 0, shown.stderr
    reflective = json.loads(shown.stdout)["reflective"]
    assert len(reflective) == 20
    assert all(s["reference_tokens"] > 20 and len(s["tokens"]) == 5 for s in reflective)

    # An arithmetic model is nearly uniform over English text: its R3 sits near 0.01 and
    # varies little, below the default variance threshold (made for pass rates); the
    # threshold is set to the reward's scale (docs/guides/verifier-free.md).
    out = tmp_path / "kept.jsonl"
    default = run_curate("filter", run, "-o", out)
    assert default.returncode == 1 and "low_variance" in default.stderr
    filtered = run_curate("filter", run, "--threshold", "1e-12", "-o", out)
    assert filtered.returncode == 0, filtered.stderr
    kept = out.read_text().splitlines()
    assert 0 < len(kept) <= 20

    plot = run_curate("plot", run, "--kind", "reflective", "open-01")
    assert plot.returncode == 0, plot.stderr
    assert (run / "plots" / "reflective-open-01.png").stat().st_size > 1000
