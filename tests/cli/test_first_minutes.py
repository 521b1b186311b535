"""The first ten minutes: what a newcomer meets first in `curate eval`.

Readable --help at 80 columns, a mistyped model that fails at once, a dry run that
refuses what the real run refuses, a run whose rollouts all failed that says so and
exits 1, and Ctrl-C that says how to resume (a real process, a real SIGINT)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from curate.backends.base import Generation
from curate.backends.fake import FakeBackend
from curate.backends.vllm_options import check_model_source, engine_dtype, looks_local
from curate.errors import InputError
from curate.store.run_dir import RolloutStore
from tests.cli.test_eval_command import wait_for_shards
from tests.conftest import ARITHMETIC, ROOT, TINY_MODEL

COMMANDS = ["eval", "report", "plot", "filter", "allocate"]


def _help(command: str | None) -> str:
    args = [sys.executable, "-m", "curate", *([command] if command else []), "--help"]
    env = {**os.environ, "COLUMNS": "80", "TERMINAL_WIDTH": ""}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_eval_help_reads_well_at_80_columns() -> None:
    from curate.cli.eval import eval_cmd  # the function typer reads its options from

    text = _help("eval")
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # no option name or text cut short
    names = re.findall(r"--[a-z][a-z-]+", text)
    annotations = eval_cmd.__wrapped__.__annotations__  # type: ignore[attr-defined]
    for param in annotations:
        if param not in ("ctx", "data", "return"):
            assert "--" + param.replace("_", "-") in names, param
    for panel in ("Sampling", "Grading", "vLLM engine", "OpenAI-compatible", "Adaptive"):
        assert f"─ {panel}" in text, panel
    # The defaults a newcomer asks about are spelled out.
    for default in ("runs/DATA__MODEL", "[default: 8]", "[default: 256]", "[default: vllm]"):
        assert default in " ".join(text.split()), default
    # Help text wraps into lines, not into single words.
    widths = [len(line.split("│")[1].rstrip()) for line in text.splitlines() if "│" in line]
    assert min(w for w in widths if w > 0) >= 20


@pytest.mark.parametrize("command", [None, *COMMANDS[1:]])
def test_every_help_fits_80_columns(command: str | None) -> None:
    text = _help(command)
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_mistyped_local_model_fails_at_once(cli, tmp_path: Path) -> None:
    typo = str(TINY_MODEL)[:-1]  # .../tiny-mat
    start = time.monotonic()
    result = cli("eval", ARITHMETIC, "--model", typo, "--out", tmp_path / "run")
    assert time.monotonic() - start < 20  # no minute of hub retries
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "no such model directory" in lines[0] and "did you mean" in lines[0]
    assert str(TINY_MODEL) in lines[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("model", "local"),
    [
        ("./m", True),
        ("/models/m", True),
        ("~/m", True),
        ("a/b/c", True),
        ("models/", True),
        ("has space", True),
        ("sample_data/tiny-mat", True),  # sample_data/ is a local directory
        ("gpt2", False),
        ("Qwen/Qwen2.5-0.5B-Instruct", False),
    ],
)
def test_what_looks_like_a_local_path(
    model: str, local: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert looks_local(model) is local


def test_a_hub_name_offline_and_not_cached_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **k: None)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError, match="HF_HUB_OFFLINE"):
        check_model_source("some-org/some-model")

    # Online, but the hub cannot be reached: one probe, no retries.
    def unreachable(*args: Any, **kwargs: Any) -> bool:
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "file_exists", unreachable)
    with pytest.raises(InputError, match="cannot be reached"):
        check_model_source("some-org/some-model")

    # Cached: the engine is told to stay offline and load it from the cache.
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **k: "/c/x")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    check_model_source("some-org/some-model")
    assert os.environ["HF_HUB_OFFLINE"] == "1" and constants.HF_HUB_OFFLINE
    monkeypatch.delenv("HF_HUB_OFFLINE")


def test_a_float32_model_keeps_float32_on_the_cpu(tmp_path: Path) -> None:
    assert engine_dtype(str(TINY_MODEL), "auto", on_cpu=True) == "float32"
    assert engine_dtype(str(TINY_MODEL), "auto", on_cpu=False) == "auto"
    assert engine_dtype(str(TINY_MODEL), "bfloat16", on_cpu=True) == "bfloat16"
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    assert engine_dtype(str(tmp_path), "auto", on_cpu=True) == "auto"
    assert engine_dtype("org/hub-model", "auto", on_cpu=True) == "auto"


def test_the_bundled_model_fits_the_default_max_tokens() -> None:
    """Served by vLLM, a request needs prompt + max_tokens <= the context (else 400):
    the bundled prompts are < 60 tokens and curate's default max_tokens is 256."""
    config = json.loads((TINY_MODEL / "config.json").read_text())
    tokenizer = json.loads((TINY_MODEL / "tokenizer_config.json").read_text())
    assert config["max_position_embeddings"] >= 60 + 256
    assert tokenizer["model_max_length"] == config["max_position_embeddings"]


def test_dry_run_refuses_an_unknown_grader(cli) -> None:
    result = cli("eval", ARITHMETIC, "--model", "m", "--grader", "numerik", "--dry-run")
    assert result.exit_code == 2
    assert "unknown grader 'numerik'" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""


def test_a_run_whose_rollouts_all_failed_says_so_and_exits_1(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(self: FakeBackend, requests: Any, sampling: Any, mode: Any) -> Any:
        return [[Generation(text=None, error="HTTP 400: too long")] * r.n for r in requests]

    monkeypatch.setattr(FakeBackend, "generate", failing)
    run = tmp_path / "run"
    args = ("eval", ARITHMETIC, "--model", "m", "--backend", "fake", "--limit", "5", "-n", "4")
    result = cli(*args, "--out", run, "--quiet")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert f"{run}: all 20 rollouts failed" in result.stdout
    assert "next:" not in result.stdout

    monkeypatch.undo()  # the endpoint works again: the failed rollouts are redone
    again = cli(*args, "--out", run, "--quiet")
    assert again.exit_code == 0, again.stdout + again.stderr
    assert "20 new rollouts" in again.stdout


def test_ctrl_c_says_what_is_stored_and_how_to_resume(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "curate",
        "eval",
        str(ARITHMETIC),
        "--model",
        "m",
        "--backend",
        "fake",
        "-n",
        "2",
        "--chunk-size",
        "4",
        "--out",
        str(run),
    ]
    env = {k: v for k, v in os.environ.items() if k != "CURATE_DEBUG"}
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "CURATE_FAKE_DELAY_S": "0.2"},
    )
    try:
        wait_for_shards(proc, run, 2, timeout=60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    stored = RolloutStore(run).rollouts().height
    assert 0 < stored < 300 * 2
    assert err.splitlines()[-1] == (
        f"curate: interrupted; {stored} rollouts are stored in {run}: "
        "run the same command again to resume"
    )
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"({stored} already stored)" in again.stdout


def test_help_shows_the_grading_panel_for_the_grader(cli) -> None:
    text = cli("eval", "--help").stdout
    assert text.index("─ Grading") < text.index("--grader")
