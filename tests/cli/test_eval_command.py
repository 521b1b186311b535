"""`curate eval` end to end: real subprocesses, the real engine, a real kill -9."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from curate.cli.app import app
from curate.store.run_dir import RolloutStore
from tests.conftest import ARITHMETIC, ROOT, TINY_MODEL, VLLM_DEVICE

ENGINE_FLAGS = ["--kv-cache-memory-gb", "0.25"]


def _vllm_eval_args(run: Path, *extra: str) -> list[str]:
    """`curate eval` of the bundled data on the tiny model with the real engine, into `run`."""
    return [
        "eval",
        str(ARITHMETIC),
        "--backend",
        "vllm",
        "--model",
        str(TINY_MODEL),
        "--max-tokens",
        "16",
        "--out",
        str(run),
        *ENGINE_FLAGS,
        *extra,
    ]


def wait_for_shards(proc: subprocess.Popen[str], run: Path, count: int, timeout: float) -> None:
    """Wait until the running eval `proc` has written `count` shards into `run`; it
    must still be running then (to be killed or interrupted mid-run)."""
    shards = run / "rollouts"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if shards.is_dir() and len(list(shards.glob("part-*.parquet"))) >= count:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "eval finished before it could be stopped"


def _curate(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "curate", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "CURATE_DEBUG": ""},
    )


def test_eval_bad_inputs_exit_2_with_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    cases = [
        (["eval", str(tmp_path / "nope.jsonl"), "--model", "m"], "no such file"),
        (["eval", str(ARITHMETIC), "--model", "m", "--backend", "nope"], "unknown backend"),
        (
            ["eval", str(ARITHMETIC), "--model", "m", "--grader", "python:missing.py:f"],
            "missing.py",
        ),
        (["eval", str(ARITHMETIC), "--model", "m", "--answer-field", "zzz"], "zzz"),
    ]
    for args, needle in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and needle in lines[0], (args, result.stderr)
        assert "Traceback" not in result.output


def test_mismatched_rerun_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    RolloutStore(run).create()
    RolloutStore(run).write_manifest(
        {"model": str(TINY_MODEL), "sampling": {"temperature": 0.2}, "grader": "numeric"}
    )
    # A rollout fixes the settings (a directory without one accepts new settings).
    RolloutStore(run).append(pl.DataFrame({"sample_id": ["arith-0001"], "rollout_idx": [0]}))
    result = CliRunner().invoke(
        app, ["eval", str(ARITHMETIC), "--model", str(TINY_MODEL), "--out", str(run)]
    )
    assert result.exit_code == 2
    assert "temperature 0.2 -> 1.0" in result.stderr and "--force-new" in result.stderr


@pytest.mark.slow
def test_eval_then_report_plot_filter_as_subprocesses(tmp_path: Path) -> None:
    run = tmp_path / "run"
    res = _curate(*_vllm_eval_args(run, "--limit", "60", "-n", "4"))
    assert res.returncode == 0, res.stderr[-2000:]
    # The terminal holds curate's lines only; the engine's own output is in its log.
    log = run / "engine.log"
    # First the layout recognised, how references are read and graded (before anything
    # starts), then the engine.
    err = res.stderr.splitlines()
    assert err[0].startswith("layout: ")
    assert err[1].startswith("references: ") and err[2].startswith("grader: numeric")
    engine = _after_preflight(err)
    assert engine[0] == f"eval: starting the vLLM engine for {TINY_MODEL} (log: {log}) ..."
    assert re.search(r"^eval: engine ready in \d+\.\d s$", res.stderr, re.MULTILINE)
    lines = res.stdout.splitlines() + engine
    assert all(line.startswith(("eval: ", f"{run}: ", "next: ")) for line in lines), lines
    engine_log = log.read_text()
    assert f"=== curate eval: engine for {TINY_MODEL}" in engine_log
    assert "force killing" not in engine_log  # shut down cleanly
    if VLLM_DEVICE == "cpu":  # the CPU build keeps a float32 checkpoint in float32
        assert "into parameter with dtype torch.bfloat16" not in engine_log
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["mode"] == "chat" and len(manifest["chat_template_sha256"]) == 64
    assert manifest["grader"] == "numeric" and manifest["runs"] == 4
    assert "key" not in json.dumps(manifest).lower()
    rep = _curate("report", str(run), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    body = json.loads(rep.stdout)
    assert body["samples"] == 60 and body["rollouts"] == 240
    assert sum(body["categories"].values()) == 60
    assert _curate("plot", str(run), "-o", str(tmp_path / "v.png")).returncode == 0
    assert (tmp_path / "v.png").stat().st_size > 1000
    flt = _curate("filter", str(run), "-o", str(tmp_path / "keep.jsonl"))
    assert flt.returncode == 0, flt.stderr
    kept = pl.read_ndjson(tmp_path / "keep.jsonl")
    assert {"question", "answer", "difficulty", "pass_rate", "variance", "n_rollouts"} <= set(
        kept.columns
    )


@pytest.mark.slow
def test_resume_after_kill_9_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "curate",
        *_vllm_eval_args(run, "-n", "8", "--chunk-size", "3", "--quiet"),
    ]
    proc = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        wait_for_shards(proc, run, 3, timeout=300)
        os.killpg(proc.pid, signal.SIGKILL)  # the engine's workers too
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    before = RolloutStore(run).rollouts()
    assert 0 < before.height < 300 * 8
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"{before.height} already stored" in res.stdout
    after = RolloutStore(run).rollouts()
    assert after.height == 300 * 8
    assert after.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    kept = before.join(after, on=["sample_id", "rollout_idx"], suffix="_after")
    assert kept.height == before.height
    assert (kept["completion"] == kept["completion_after"]).all()


@pytest.mark.slow
def test_an_engine_that_cannot_start_points_to_its_log(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (model / name).write_bytes((TINY_MODEL / name).read_bytes())
    config = json.loads((TINY_MODEL / "config.json").read_text())
    (model / "config.json").write_text(
        json.dumps({**config, "architectures": ["NoSuchModelForCausalLM"]})
    )
    run = tmp_path / "run"
    res = _curate("eval", str(ARITHMETIC), "--model", str(model), "--out", str(run), "-n", "1")
    assert res.returncode == 1
    lines = _after_preflight(res.stderr.splitlines())
    assert lines[0].startswith("eval: starting the vLLM engine") and len(lines) == 2, lines
    assert lines[1].startswith("curate: error: vLLM could not start the engine")
    assert lines[1].endswith(f"(engine log: {run / 'engine.log'})")
    assert "NoSuchModelForCausalLM" in lines[1]
    assert (run / "engine.log").is_file()


def _after_preflight(lines: list[str]) -> list[str]:
    """stderr after the start-of-eval block (references, grader, check, one prompt)."""
    for i, line in enumerate(lines):
        if line.startswith("reference as graded: "):
            return lines[i + 1 :]
    return lines
