"""Endpoint pools through the openai backend and `curate eval`: one healthy replica
beside a failing one (every request a 503) or a dead one (nothing listens); loopback
fakes only (the real-server test is tests/backends/test_openai_pool_vllm.py)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openai")

from curate.backends.openai_api import open_openai
from curate.backends.openai_options import OpenAIOptions
from curate.errors import UsageError
from curate.remote.openai_wire import replica_fault
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import FakeOpenAIServer, FaultProxy
from tests.backends.test_openai_unit import FAST, SAMPLING, requests_for
from tests.conftest import invoke_curate


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(latency_s=0.01) as srv:
        yield srv


def dead_url() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_failing_replica_is_rested_and_every_rollout_succeeds(server: FakeOpenAIServer) -> None:
    with (
        FaultProxy(server.url, shares={"503": 1.0}, seed=1) as failing,
        open_openai(
            "fake-model",
            base_url=(server.base_url, failing.base_url),
            concurrency=4,
            max_retries=6,
            **FAST,
        ) as backend,
    ):
        out = backend.generate(requests_for(40, n=2), SAMPLING, "chat")
    assert all(g.error is None for gens in out for g in gens)
    healthy, bad = backend.pool.replicas
    assert healthy.rollouts == 80 and bad.rollouts == 0
    # Rested after 3 failures in a row: it got only a handful of the 40+ requests.
    assert bad.rests >= 1 and bad.failures == bad.attempts < 10
    assert healthy.ok == len(server.bodies) == 40
    lines = backend.pool.lines()
    assert lines[1].startswith(f"replica {failing.base_url}: 0 requests, 0 rollouts")
    assert "rested" in lines[1]


def test_a_dead_replica_does_not_stop_the_run(server: FakeOpenAIServer) -> None:
    dead = dead_url()
    with open_openai(
        "fake-model", base_url=(dead, server.base_url), concurrency=4, max_retries=6, **FAST
    ) as backend:
        out = backend.generate(requests_for(30, n=2), SAMPLING, "chat")
    assert all(g.error is None for gens in out for g in gens)
    down, healthy = backend.pool.replicas
    assert healthy.rollouts == 60 and down.ok == 0 and down.rests >= 1


def test_load_follows_the_faster_replica() -> None:
    with (
        FakeOpenAIServer(latency_s=0.01) as fast,
        FakeOpenAIServer(latency_s=0.1) as slow,
        open_openai(
            "fake-model", base_url=(fast.base_url, slow.base_url), concurrency=8, **FAST
        ) as backend,
    ):
        backend.generate(requests_for(120, n=1), SAMPLING, "chat")
    quick, sluggish = backend.pool.replicas
    assert quick.ok + sluggish.ok == 120
    assert quick.ok > 2 * sluggish.ok  # least outstanding: the slow one keeps its requests


def test_replica_fault_is_the_replica_not_the_request() -> None:
    import httpx
    import openai

    req = httpx.Request("POST", "http://h/v1/chat/completions")

    def status(code: int) -> openai.APIStatusError:
        return openai.APIStatusError("x", response=httpx.Response(code, request=req), body=None)

    assert replica_fault(status(503)) and replica_fault(status(500))
    assert not replica_fault(status(400)) and not replica_fault(status(429))
    assert replica_fault(openai.APIConnectionError(request=req))
    assert replica_fault(TimeoutError())


def test_options_normalise_and_refuse() -> None:
    assert OpenAIOptions.parse({"base_url": ["http://a/v1"]}).base_url == "http://a/v1"
    pool = OpenAIOptions.parse({"base_url": ["http://a/v1", "http://b/v1"]})
    assert pool.urls() == ("http://a/v1", "http://b/v1")
    assert pool.record()["base_url"] == ["http://a/v1", "http://b/v1"]
    with pytest.raises(UsageError, match="same URL is given twice"):
        OpenAIOptions.parse({"base_url": ["http://a/v1", "http://a/v1"]})
    with pytest.raises(UsageError, match="password"):
        OpenAIOptions.parse({"base_url": ["http://a/v1", "http://u:secret@b/v1"]})


def test_eval_with_two_base_urls(tmp_path: Path, server: FakeOpenAIServer) -> None:
    data = tmp_path / "arith.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
            + "\n"
            for i in range(12)
        )
    )
    out = tmp_path / "run"
    with FaultProxy(server.url, shares={"503": 1.0}, seed=2) as failing:
        res = invoke_curate(
            "eval", data, "--backend", "openai", "--model", "fake-model",
            "--base-url", server.base_url, "--base-url", failing.base_url,
            "--rollouts", 4, "--max-tokens", 8, "--out", out, "--quiet", "--concurrency", 4,
        )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "48 new rollouts" in res.stdout and "0 errors" in res.stdout
    assert RolloutStore(out).rollouts()["error"].null_count() == 48
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["engine_options"]["base_url"] == [server.base_url, failing.base_url]
    assert manifest["backend_info"]["base_urls"] == [server.base_url, failing.base_url]
    assert f"replica {server.base_url}: " in res.stderr
    assert f"replica {failing.base_url}: 0 requests, 0 rollouts" in res.stderr
