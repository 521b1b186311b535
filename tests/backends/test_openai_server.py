"""`curate eval --backend openai` against a real vLLM OpenAI-compatible server (CPU build)
serving the bundled tiny model, directly and through the fault-injecting proxy.

One server per session (start-up ~40 s); every request loop is bounded by the data
and by the client's retries, and every server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

pytest.importorskip("openai")
pytest.importorskip("vllm")

from curate.backends.base import SamplingConfig
from curate.backends.openai_api import open_openai
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import FaultProxy, VLLMServer, assert_one_retry_per_fault
from tests.conftest import (
    ARITHMETIC,
    ROOT,
    TINY_MODEL,
    VLLM_SERVER_KEY,
    chat_prompts_and_references,
    invoke_curate,
    run_chat_eval,
)

pytestmark = pytest.mark.slow

MODEL = str(TINY_MODEL)
KEY = VLLM_SERVER_KEY  # the session server (tests/conftest.py) takes this key
KEY_ENV = "CURATE_TEST_VLLM_KEY"
ALL_FAULTS = {
    "429_retry_after": 0.03,
    "429": 0.03,
    "500": 0.03,
    "503": 0.03,
    "drop": 0.03,
    "stall": 0.02,
    "truncate": 0.03,
    "no_choices": 0.02,
}


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY_ENV


@pytest.fixture(scope="session")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 arithmetic problems: the bundled set's first ones (else made up alike)."""
    path = tmp_path_factory.mktemp("data") / "arith.jsonl"
    if ARITHMETIC.is_file():
        lines = ARITHMETIC.read_text().splitlines()[:40]
    else:
        lines = [
            json.dumps(
                {"id": f"p{i:02d}", "question": f"What is {i} + {i % 7}?", "answer": str(i + i % 7)}
            )
            for i in range(40)
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def eval_args(data: Path, out: Path, base_url: str, *extra: object) -> list[object]:
    return [
        "eval",
        data,
        "--backend",
        "openai",
        "--model",
        MODEL,
        "--base-url",
        base_url,
        "--api-key-env",
        KEY_ENV,
        "--rollouts",
        4,
        "--max-tokens",
        16,
        "--out",
        out,
        "--quiet",
        *extra,
    ]


def assert_complete(run: Path, samples: int, runs: int) -> pl.DataFrame:
    """Exactly one scored rollout per (sample_id, rollout_idx), none an error."""
    frame = RolloutStore(run).rollouts()
    assert frame.height == samples * runs
    assert frame.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    assert frame["error"].null_count() == frame.height
    assert frame["score"].null_count() == 0
    return frame


def secret_free(*texts: str, run: Path | None = None) -> bool:
    files = [p.read_bytes().decode("latin-1") for p in run.rglob("*") if p.is_file()] if run else []
    return all(KEY not in t for t in (*texts, *files))


# ------------------------------------------------------------------ the real server


@pytest.mark.parametrize("mode", ["chat", "completion"])
def test_modes_n_per_request_and_no_key_on_disk(
    vllm_server: VLLMServer, data: Path, tmp_path: Path, key_env: str, mode: str
) -> None:
    run = tmp_path / "run"
    with FaultProxy(vllm_server.url) as counter:  # no faults: it only counts requests
        res = invoke_curate(*eval_args(data, run, counter.base_url, "--mode", mode))
    assert res.exit_code == 0, res.stderr
    frame = assert_complete(run, 40, 4)
    # n=4 per request, one request per prompt, and the first prompt asked once more: its
    # answer shows a vLLM server that counts tokens per rollout (return_token_ids)
    assert counter.requests == 40 + 1
    assert frame["completion_tokens"].min() >= 1 and frame["prompt_tokens"].sum() > 0
    if mode == "chat":  # trained through its chat template: raw text is not its format
        assert frame["score"].sum() > 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["mode"] == mode and manifest["engine_options"]["api_key_env"] == KEY_ENV
    assert secret_free(res.stdout, res.stderr, run=run)
    rep = invoke_curate("report", run, "--format", "json", "--price-in", 1, "--price-out", 3)
    assert rep.exit_code == 0 and json.loads(rep.stdout)["usage"]["prompt_tokens"] == int(
        frame["prompt_tokens"].sum()
    )


def test_faults_are_retried_counted_and_never_scored(
    vllm_server: VLLMServer, data: Path, tmp_path: Path, key_env: str
) -> None:
    prompts, refs = chat_prompts_and_references(data)
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)

    def run(base_url: str, out: Path, **options: Any) -> tuple[pl.DataFrame, Any]:
        with open_openai(
            MODEL, seed=0, base_url=base_url, api_key_env=key_env, **options
        ) as backend:
            result, frame = run_chat_eval(backend, out, prompts, refs, runs=6, sampling=sampling)
        assert result.errors == 0
        return frame.sort("sample_id", "rollout_idx"), backend

    clean, _ = run(vllm_server.base_url, tmp_path / "clean")
    with FaultProxy(
        vllm_server.url, shares=ALL_FAULTS, seed=11, stall_s=3.0, retry_after="1"
    ) as proxy:
        faulty, backend = run(
            proxy.base_url,
            tmp_path / "faulty",
            concurrency=8,
            timeout=2.0,
            max_retries=4,
            backoff_base=0.05,
            backoff_max=0.5,
        )
    assert_complete(tmp_path / "faulty", 40, 6)
    assert proxy.total_injected >= 8, proxy.injected
    assert_one_retry_per_fault(backend.stats, proxy)
    # The same seeded requests give the same completions: no fault became a (wrong) answer.
    assert faulty["completion"].to_list() == clean["completion"].to_list()
    assert faulty["score"].to_list() == clean["score"].to_list()
    retried = faulty.filter(pl.col("attempts") > 1)
    assert retried.height > 0 and clean["attempts"].max() == 1


def test_outage_error_rows_then_resume(
    vllm_server: VLLMServer, data: Path, tmp_path: Path, key_env: str
) -> None:
    run = tmp_path / "run"
    lines = data.read_text().splitlines()
    doomed = [json.loads(lines[i])["question"] for i in (3, 17)]
    with FaultProxy(vllm_server.url, fail_forever=doomed) as proxy:
        res = invoke_curate(*eval_args(data, run, proxy.base_url, "--max-retries", 2))
        assert res.exit_code == 0, res.stderr
        assert "8 errors" in res.stdout and "8 rollouts failed after retries" in res.stderr
        frame = RolloutStore(run).rollouts()
        errors = frame.filter(pl.col("error").is_not_null())
        assert errors.height == 8 and errors["score"].null_count() == 8
        assert (errors["attempts"] == 3).all() and proxy.persistent == 2 * 3

        rep = invoke_curate("report", run, "--max-error-rate", 0.01)
        assert rep.exit_code == 1 and "errors" in rep.stdout and "8 (5.0%)" in rep.stdout
        assert "check failed: max-error-rate" in rep.stderr

        proxy.recover()
        res = invoke_curate(*eval_args(data, run, proxy.base_url))
        assert res.exit_code == 0, res.stderr
        assert "8 new rollouts" in res.stdout and "152 already stored" in res.stdout
    assert_complete(run, 40, 4)
    assert invoke_curate("report", run, "--max-error-rate", 0.0).exit_code == 0


def test_endpoint_rejecting_n_gives_the_same_rollouts(
    vllm_server: VLLMServer, data: Path, tmp_path: Path, key_env: str
) -> None:
    run = tmp_path / "run"
    with FaultProxy(vllm_server.url, reject_n=True) as proxy:
        res = invoke_curate(*eval_args(data, run, proxy.base_url))
    assert res.exit_code == 0, res.stderr
    assert "rejects n > 1" in res.stderr
    frame = assert_complete(run, 40, 4)
    assert proxy.rejected_n == 2  # the first request, with and without its seed: once
    assert proxy.forwarded == frame.height  # then one request per rollout
    # Each rollout stores the seed of the request that produced it.
    assert frame["seed"].n_unique() == frame.height


def test_a_prompt_past_the_context_becomes_its_error_rows(
    vllm_server: VLLMServer, data: Path, tmp_path: Path, key_env: str
) -> None:
    rows = [json.loads(line) for line in data.read_text().splitlines()[:10]]
    rows[4]["question"] = rows[4]["question"] + " Think it over." * 200  # past 256 tokens
    short = tmp_path / "with_long.jsonl"
    short.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    # Without the context check (which would refuse the run before it starts).
    res = invoke_curate(*eval_args(short, run, vllm_server.base_url, "--no-context-check"))
    assert res.exit_code == 0, res.stderr
    assert "4 errors" in res.stdout and "4 rollouts rejected by the endpoint" in res.stderr
    frame = RolloutStore(run).rollouts()
    errors = frame.filter(pl.col("error").is_not_null())
    assert errors.height == 4 and set(errors["sample_id"]) == {str(rows[4]["id"])}
    assert all(e.startswith("rejected: 400") for e in errors["error"]), errors["error"][0]
    assert frame.filter(pl.col("error").is_null()).height == 36


@pytest.mark.parametrize(
    ("model", "key", "needle"),
    [
        ("no-such-model", KEY, "model 'no-such-model' not found at "),
        (MODEL, "sk-wrong-key-for-this-server-1", "authentication failed at "),
    ],
)
def test_wrong_model_or_key_stops_at_once(
    vllm_server: VLLMServer,
    data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    key: str,
    needle: str,
) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    args = eval_args(data, tmp_path / "run", vllm_server.base_url)
    args[args.index(MODEL)] = model
    start = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "curate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "CURATE_DEBUG": ""},
    )
    assert time.monotonic() - start < 60
    assert res.returncode == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle + vllm_server.base_url in lines[0], res.stderr
    assert KEY not in res.stderr + res.stdout and key not in res.stderr + res.stdout


def test_resume_after_kill_9(
    vllm_server: VLLMServer, data: Path, tmp_path: Path, key_env: str
) -> None:
    run = tmp_path / "run"
    # Slowed down so that the kill lands mid-run: 40 requests of 1 s, 2 at a time.
    with FaultProxy(vllm_server.url, delay_s=1.0) as proxy:
        args = [
            sys.executable,
            "-m",
            "curate",
            *map(str, eval_args(data, run, proxy.base_url, "--concurrency", 2)),
        ]
        env = {**os.environ, "CURATE_DEBUG": ""}
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(proxy.completed) < 10:
                assert proc.poll() is None, "eval finished before it could be killed"
                time.sleep(0.1)
            time.sleep(4.5)  # past the engine's 2 s flush of finished rollouts
            assert proc.poll() is None, "eval finished before it could be killed"
            os.killpg(proc.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        before = RolloutStore(run).rollouts()
        # Everything that came back more than 3.5 s before the kill was on disk.
        settled = sum(n for t, n in proxy.completed if t < killed_at - 3.5)
        assert settled > 0 and before.height >= settled
        assert 0 < before.height < 160
        proxy.delay_s = 0.0
        res = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"{before.height} already stored" in res.stdout
    assert_complete(run, 40, 4)
