"""`curate hint` as a real process: a hinted run beside a fake-backend run, the run's
report unchanged by it, JSON keys, and bad input as one line, exit 2, nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

ROWS = [
    {"id": "p1", "question": "What is 852 * 66?", "answer": "56232"},
    {"id": "p2", "question": "What is 7 * 5?", "answer": "35"},
    {"id": "p3", "question": "What is 3 - 3?", "answer": "0"},
]


@pytest.fixture
def fake_run(inputs: Path, run_curate: Callable[..., object]) -> Path:
    data = inputs / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    run = inputs / "run"
    result = run_curate("eval", data, "--backend", "fake", "--model", "m", "-n", "4", "-o", run)
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    return run


def test_hint_writes_a_hinted_run_and_leaves_the_report_alone(
    fake_run: Path, run_curate: Callable[..., object]
) -> None:
    report = run_curate("report", fake_run, "--format", "json")
    result = run_curate("hint", fake_run, "--format", "json", "-q")
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    doc = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert doc["collapsed"] == 3 and doc["without_hint"] == 1 and doc["group_size"] == 4
    assert [lv["level"] for lv in doc["levels"]] == [1, 2, 3]
    assert doc["levels"][0]["prompts"] == 2  # p1 and p2; p2's levels repeat level 1
    # The fake never passes: no level brings a prompt into the band.
    assert doc["recommended"] == [{"sample_id": s, "level": None} for s in ("p1", "p2", "p3")]
    assert Path(doc["hinted_run"]) == fake_run / "hints" / "incorrect"
    again = run_curate("report", fake_run, "--format", "json")
    assert again.stdout == report.stdout  # type: ignore[attr-defined]
    text = run_curate("hint", fake_run, "-q")
    assert text.returncode == 0  # type: ignore[attr-defined]
    assert "level 1: 2 prompts, 8 rollouts" in text.stdout  # type: ignore[attr-defined]
    assert "next: curate filter" in text.stdout  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stratum", "mixed"], "--stratum must be one of incorrect, correct"),
        (["--band", "half"], "--band must be LOW,HIGH"),
        (["--band", "0.9,0.1"], "--band must be LOW,HIGH"),
        (["-n", "1"], "-n must be at least 2"),
        (["--format", "yaml"], "--format must be table or json"),
        (["--hint-backend", "fake"], "--hint-backend only applies with --hint-model"),
    ],
)
def test_bad_options_one_line_exit_2_nothing_written(
    fake_run: Path,
    run_curate: Callable[..., object],
    snapshot: Callable[..., set[Path]],
    args: list[str],
    message: str,
) -> None:
    before = snapshot(fake_run)
    result = run_curate("hint", fake_run, *args)
    assert result.returncode == 2  # type: ignore[attr-defined]
    err = result.stderr.strip()  # type: ignore[attr-defined]
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert snapshot(fake_run) == before


def test_not_a_run_directory(inputs: Path, run_curate: Callable[..., object]) -> None:
    result = run_curate("hint", inputs / "missing")
    assert result.returncode == 2  # type: ignore[attr-defined]
    assert result.stderr.strip().splitlines() == [  # type: ignore[attr-defined]
        f"curate: error: {inputs / 'missing'}: not a run directory (no manifest.json)"
    ]
    assert not (inputs / "missing").exists()


def test_hint_model_through_the_cli(fake_run: Path, run_curate: Callable[..., object]) -> None:
    """--hint-model reaches the library: the fake writer's replies (not the answer) are
    the hints, in their own hinted run."""
    result = run_curate(
        "hint", fake_run, "--hint-model", "w", "--hint-backend", "fake", "--format", "json", "-q"
    )
    assert result.returncode == 0, result.stderr  # type: ignore[attr-defined]
    doc = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert Path(doc["hinted_run"]) == fake_run / "hints" / "incorrect-model-w"
    assert doc["without_hint"] == 0 and [lv["prompts"] for lv in doc["levels"]] == [3, 3, 3]
