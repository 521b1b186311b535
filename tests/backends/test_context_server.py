"""The context check against the session's real vLLM OpenAI-compatible server (the
bundled tiny model at `--max-model-len 256`): the window from its /v1/models card,
prompts counted by its /tokenize, a run that cannot fit refused before anything is
written, and one that fits run as usual."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("vllm")

from curate.backends.context import Endpoint, local_counter
from curate.evaluation.preflight import apply_local_template
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import VLLMServer
from tests.conftest import ARITHMETIC, TINY_MODEL, VLLM_SERVER_KEY, invoke_curate

pytestmark = pytest.mark.slow

MODEL = str(TINY_MODEL)


KEY_ENV = "CURATE_TEST_CONTEXT_KEY"


@pytest.fixture
def server(vllm_server: VLLMServer, monkeypatch: pytest.MonkeyPatch) -> VLLMServer:
    monkeypatch.setenv(KEY_ENV, VLLM_SERVER_KEY)
    return vllm_server


def test_window_and_counts_from_the_server(server: VLLMServer) -> None:
    endpoint = Endpoint(server.base_url, MODEL, VLLM_SERVER_KEY)
    try:
        assert endpoint.window() == (server.max_model_len, "the endpoint's max_model_len")
        counter = endpoint.counter("chat")
        messages = [{"role": "user", "content": "What is 825 + 506?"}]
        remote = counter.count(messages)
        assert endpoint.exact
    finally:
        endpoint.close()
    # The server's count is the one curate makes locally for the vLLM engine.
    local = local_counter(MODEL, "chat", apply_local_template)
    assert local is not None and remote == local.count(messages) and remote > 5
    # Another model name has no card: no window, no check.
    other = Endpoint(server.base_url, "no-such-model", VLLM_SERVER_KEY)
    try:
        assert other.window() is None
    finally:
        other.close()


def _args(out: Path, server: VLLMServer, *extra: object) -> list[object]:
    return [
        "eval", ARITHMETIC, "--backend", "openai", "--model", MODEL,
        "--base-url", server.base_url, "--api-key-env", KEY_ENV, "--out", out,
        "--limit", "4", "-n", "2", "--quiet",
        *extra,
    ]  # fmt: skip


def test_a_run_that_cannot_fit_is_refused(server: VLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    window = server.max_model_len
    res = invoke_curate(*_args(out, server, "--max-tokens", str(window)))
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert f"by the endpoint's /tokenize) plus --max-tokens {window}" in line
    assert f"over the model's {window} (the endpoint's max_model_len)" in line
    assert "lower --max-tokens to " in line
    assert not out.exists()


def test_a_run_that_fits_runs(server: VLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = invoke_curate(*_args(out, server, "--max-tokens", "16"))
    assert res.exit_code == 0, res.output
    frame = RolloutStore(out).rollouts()
    assert frame.height == 8 and frame["error"].null_count() == 8
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["truncation"] == "grade"
