"""The CI job of docs/guides/ci-gating.md, step by step: evaluate a candidate data set,
then gate on its learnable share with the Markdown report appended to the job summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.evaluation.evaluate import evaluate
from tests.conftest import JSON_CONTRACT_KEYS, fake_eval_options

# The JSON report's documented contract (docs/reference/json.md): keys may be added,
# never removed.
JSON_KEYS = JSON_CONTRACT_KEYS | {
    "unscored_samples",
    "error_rate",
    "rollouts_per_sample",
    "binary_scores",
    "prior",
    "gates",
    "passed",
}


def candidate(tmp_path: Path, rates: tuple[float, ...]) -> Path:
    """A data set of 30 problems evaluated with the fake backend at the given pass rates."""
    rows = [
        {"id": f"p{i:02d}", "question": f"{i} + {i} = ?", "answer": str(2 * i)} for i in range(30)
    ]
    data = tmp_path / "candidate.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = {r["question"]: (r["answer"], rates[i % len(rates)]) for i, r in enumerate(rows)}
    run = tmp_path / "run"
    evaluate(fake_eval_options(data, run, answers, runs=8))
    return run


@pytest.mark.parametrize(
    ("rates", "code", "verdict"),
    [((0.0, 1.0, 0.5), 0, "**Checks passed**"), ((0.0, 1.0), 1, "**Checks FAILED**")],
)
def test_ci_gate_on_a_candidate(run_curate, tmp_path, rates, code, verdict) -> None:
    run = candidate(tmp_path, rates)
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n")
    proc = run_curate(
        "report",
        run,
        "--format",
        "markdown",
        "--fail-under-signal",
        "0.15",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert proc.returncode == code, proc.stderr
    assert verdict in proc.stdout
    assert summary.read_text(encoding="utf-8") == "## earlier step\n" + proc.stdout
    if code:
        assert proc.stderr.startswith("curate: check failed: fail-under-signal: ")
    report = run_curate("report", run, "--format", "json", "--fail-under-signal", "0.15")
    assert report.returncode == code
    data = json.loads(report.stdout)
    assert set(data) >= JSON_KEYS
    assert data["passed"] is (code == 0)
    assert set(data["categories"]) == {
        "always_correct",
        "always_incorrect",
        "high_variance",
        "low_variance",
    }
