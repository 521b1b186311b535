"""The context check against a real vLLM OpenAI-compatible server started with
`--max-model-len 128` on the bundled tiny model: the window from its /v1/models card,
prompts counted by its /tokenize, a run that cannot fit refused before anything is
written, and one that fits run as usual."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("vllm")

from curate.backends.context import Endpoint, local_counter
from curate.engine.preflight import apply_local_template
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import VLLMServer
from tests.conftest import ARITHMETIC, TINY_MODEL, invoke_curate

pytestmark = pytest.mark.slow

MODEL = str(TINY_MODEL)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    if not (TINY_MODEL / "config.json").is_file():
        pytest.skip(f"{TINY_MODEL} is not there yet")
    log = tmp_path_factory.mktemp("vllm128") / "server.log"
    with VLLMServer(MODEL, max_model_len=128, log_path=log) as running:
        yield running


def test_window_and_counts_from_the_server(server: VLLMServer) -> None:
    endpoint = Endpoint(server.base_url, MODEL, None)
    try:
        assert endpoint.window() == (128, "the endpoint's max_model_len")
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
    other = Endpoint(server.base_url, "no-such-model", None)
    try:
        assert other.window() is None
    finally:
        other.close()


def _args(out: Path, server: VLLMServer, *extra: object) -> list[object]:
    return [
        "eval", ARITHMETIC, "--backend", "openai", "--model", MODEL,
        "--base-url", server.base_url, "--out", out, "--limit", "4", "-n", "2", "--quiet",
        *extra,
    ]  # fmt: skip


def test_a_run_that_cannot_fit_is_refused(server: VLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = invoke_curate(*_args(out, server, "--max-tokens", "256"))
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert "by the endpoint's /tokenize) plus --max-tokens 256" in line
    assert "over the model's 128 (the endpoint's max_model_len)" in line
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
