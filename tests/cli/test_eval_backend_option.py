"""`curate eval --option NAME=VALUE` (`-O`): any option of the chosen backend's schema,
validated by it, recorded in the manifest as typed; bad ones are one line, exit 2,
and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    rows = [
        {"id": f"s{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in (1, 2)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_option_reaches_the_backend_and_the_manifest(
    cli: Callable[..., Result], data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = cli("eval", data, "--backend", "fake", "--model", "m", "-n", 2, "--out", out,
              "-O", "delay-s=0.01", "--option", "completion_chars=[5, 9]")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["engine_options"] == {"delay_s": 0.01, "completion_chars": [5, 9]}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "fake", "-O", "dleay_s=1"], "did you mean delay_s?"),
        (["--backend", "fake", "-O", "delay_s"], "expected NAME=VALUE"),
        (["--backend", "openai", "-O", "concurrency=0"], "--concurrency must be at least 1"),
        (["--backend", "openai", "-O", "transport=carrier-pigeon"], "unknown transport"),
        (
            ["--backend", "openai", "--concurrency", "3", "-O", "concurrency=2"],
            "--concurrency and --option concurrency both set it",
        ),
        (["--backend", "vllm", "-O", "max_retries=2"], "not an option of --backend vllm"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(
    cli: Callable[..., Result], data: Path, tmp_path: Path, args: list[str], needle: str
) -> None:
    out = tmp_path / "run"
    res = cli("eval", data, "--model", "m", "--out", out, *args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert not out.exists()
