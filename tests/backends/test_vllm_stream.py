"""The local engine's stream on the real vLLM engine (CPU build, bundled tiny model):
the same rollouts as a batch call, a prompt longer than the context becomes that
prompt's settled error rows while the rest completes (in the library and through
`curate eval --no-context-check`), and Ctrl-C (a real SIGINT to a real process) keeps
what the engine has finished."""

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

import polars as pl
import pytest

from curate.backends.base import GenerationRequest, SamplingConfig
from curate.core.settled import SETTLED_COLUMN
from curate.errors import RunError
from curate.store.run_dir import RolloutStore
from tests.conftest import (
    ARITHMETIC,
    ROOT,
    TEST_ENGINE_OPTIONS,
    TINY_MODEL,
    chat_prompts_and_references,
)

pytestmark = pytest.mark.slow

# Far past the tiny model's 512-token context, in any tokenisation.
LONG_QUESTION = "What is " + " + ".join(["1"] * 600) + "?"


def _requests(prompts: dict[str, Any], n: int) -> list[GenerationRequest]:
    return [
        GenerationRequest(sample_id=sid, prompt=p, n=n, first_run=0, seed=100 + i)
        for i, (sid, p) in enumerate(prompts.items())
    ]


def test_stream_gives_the_batch_call_s_rollouts(vllm_backend: Any) -> None:
    prompts, _ = chat_prompts_and_references(ARITHMETIC, 60)
    reqs = _requests(prompts, 4)
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)
    batch = vllm_backend.generate(reqs, sampling, "chat")
    streamed: dict[int, list[Any]] = {}
    for item in vllm_backend.stream(reqs, sampling, "chat"):
        if item is not None:
            assert item[0] not in streamed  # each request once
            streamed[item[0]] = item[1]
    assert sorted(streamed) == list(range(len(reqs)))
    assert [[g.text for g in streamed[i]] for i in range(len(reqs))] == [
        [g.text for g in gens] for gens in batch
    ]
    assert all(
        g.latency_s is not None and g.latency_s > 0 for gens in streamed.values() for g in gens
    )


def test_a_prompt_past_the_context_is_settled_and_the_rest_completes(vllm_backend: Any) -> None:
    prompts, _ = chat_prompts_and_references(ARITHMETIC, 20)
    long_chat = [{"role": "user", "content": LONG_QUESTION}]
    mixed = {
        **dict(list(prompts.items())[:10]),
        "long": long_chat,
        **dict(list(prompts.items())[10:]),
    }
    reqs = _requests(mixed, 3)
    got = dict(
        item for item in vllm_backend.stream(reqs, SamplingConfig(max_tokens=8), "chat") if item
    )
    assert sorted(got) == list(range(len(reqs)))
    index = list(mixed).index("long")
    assert [g.settled for g in got[index]] == [True] * 3
    # vLLM words it "maximum context length" (tokenizer check) or "maximum model length".
    assert all(re.search("maximum (context|model) length", g.error or "") for g in got[index])
    others = [g for i, gens in got.items() if i != index for g in gens]
    assert len(others) == 20 * 3 and all(g.error is None and g.text is not None for g in others)


def test_an_engine_that_refuses_every_prompt_stops_the_run(vllm_backend: Any) -> None:
    """Not one prompt's fault: no error rows, a RunError (as the endpoint path does)."""
    long_chat = [{"role": "user", "content": LONG_QUESTION}]
    reqs = _requests({"a": long_chat, "b": long_chat}, 2)
    with pytest.raises(RunError, match="refused every prompt"):
        list(vllm_backend.stream(reqs, SamplingConfig(max_tokens=8), "chat"))


def _curate(*args: object, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CURATE_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "curate", *map(str, args)],
        capture_output=True, text=True, env=env, timeout=900, cwd=ROOT, **kw,
    )  # fmt: skip


def _engine_flags() -> list[str]:
    return ["--kv-cache-memory-gb", str(TEST_ENGINE_OPTIONS["kv_cache_memory_gb"])]


def test_no_context_check_turns_the_long_prompt_into_error_rows(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in ARITHMETIC.read_text().splitlines()[:12]]
    rows.insert(5, {"id": "too-long", "question": LONG_QUESTION, "answer": "600"})
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    args = ["eval", data, "-m", TINY_MODEL, "-n", 4, "--max-tokens", 8, "-q", "-o", run]
    refused = _curate(*args, *_engine_flags())
    assert refused.returncode == 2 and "context" in refused.stderr  # the check, by default
    done = _curate(*args, *_engine_flags(), "--no-context-check")
    assert done.returncode == 0, done.stderr
    stored = RolloutStore(run).rollouts()
    assert stored.height == 13 * 4
    long = stored.filter(pl.col("sample_id") == "too-long")
    assert long[SETTLED_COLUMN].to_list() == [True] * 4
    assert long["error"].str.contains("maximum (context|model) length").all()
    rest = stored.filter(pl.col("sample_id") != "too-long")
    assert rest["error"].null_count() == rest.height
    status = _curate("status", run, "--format", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["settled"] == 4
    again = _curate(*args, *_engine_flags(), "--no-context-check")
    assert again.returncode == 0 and "0 new rollouts" in again.stdout  # nothing regenerated


RUNS = 64  # 19,200 long rollouts: minutes of work for the tiny model on a CPU


def test_ctrl_c_keeps_what_the_engine_finished(tmp_path: Path) -> None:
    """300 prompts, fewer than one default chunk (512): before streaming, an interrupt
    here lost every rollout. Long completions at temperature 2 keep the engine busy
    for minutes, so the signal comes mid-run."""
    run = tmp_path / "run"
    args = [
        sys.executable, "-m", "curate", "eval", str(ARITHMETIC), "-m", str(TINY_MODEL),
        "-n", str(RUNS), "--max-tokens", "400", "--temperature", "2", "-o", str(run),
        *_engine_flags(),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "CURATE_DEBUG"}
    proc = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    shards = run / "rollouts"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            # Three shards while the engine still runs: rollouts reach disk as they
            # finish. The batch path wrote this one-chunk run in two shards, both only
            # once every rollout was generated, so an interrupt lost them all.
            if shards.is_dir() and len(list(shards.glob("part-*.parquet"))) >= 3:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the eval ended before it could be interrupted"
        seen = RolloutStore(run).rollouts(["sample_id", "rollout_idx"]).height
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    stored = RolloutStore(run).rollouts(["sample_id", "rollout_idx", "error"])
    assert 0 < seen <= stored.height < 300 * RUNS
    # Whole requests only: each stored sample has all its rollouts.
    counts = stored.group_by("sample_id").len()["len"].unique().to_list()
    assert counts == [RUNS]
    assert err.rstrip().splitlines()[-1] == (
        f"curate: interrupted; {stored.height} rollouts are stored in {run}: "
        "run the same command again to resume"
    )
