"""An endpoint pool of two real vLLM OpenAI-compatible servers (CPU build, the bundled
tiny model, 0.25 GiB KV cache each) on loopback, the session's server and one of this
module's: both serve a `curate eval` with two --base-url; then this module's is stopped,
and the next eval goes on through the session's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("vllm")

from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import VLLMServer
from tests.conftest import ARITHMETIC, TINY_MODEL, VLLM_SERVER_KEY, invoke_curate

pytestmark = pytest.mark.slow

MODEL = str(TINY_MODEL)


KEY_ENV = "CURATE_TEST_POOL_KEY"


@pytest.fixture(scope="module")
def servers(
    vllm_server: VLLMServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[VLLMServer]]:
    """The session's server and a second one with the same key (stopped by the test)."""
    second = VLLMServer(
        MODEL, api_key=VLLM_SERVER_KEY, log_path=tmp_path_factory.mktemp("pool") / "s.log"
    )
    try:
        second.start(timeout=400)
        yield [vllm_server, second]
    finally:
        second.stop()


@pytest.fixture(autouse=True)
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, VLLM_SERVER_KEY)


def eval_args(data: Path, out: Path, urls: list[str]) -> list[object]:
    flags = [part for url in urls for part in ("--base-url", url)]
    return [
        "eval", data, "--backend", "openai", "--model", MODEL, *flags, "--api-key-env", KEY_ENV,
        "--rollouts", 4, "--max-tokens", 16, "--out", out, "--quiet", "--concurrency", 16,
        "--max-retries", 6, "--limit", 40,
    ]  # fmt: skip


def test_two_real_servers_share_an_eval_and_one_may_go_away(
    servers: list[VLLMServer], tmp_path: Path
) -> None:
    urls = [s.base_url for s in servers]
    out = tmp_path / "both"
    res = invoke_curate(*eval_args(ARITHMETIC, out, urls))
    assert res.exit_code == 0, res.stderr
    assert "160 new rollouts" in res.stdout and "0 errors" in res.stdout
    lines = [line for line in res.stderr.splitlines() if "replica " in line]
    assert len(lines) == 2, res.stderr
    for url, line in zip(urls, lines, strict=True):
        assert f"replica {url}: " in line
        assert " 0 requests" not in line  # both served some of the 40 requests
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["engine_options"]["base_url"] == urls

    servers[1].stop()  # a replica goes away: the other serves everything
    out2 = tmp_path / "one-left"
    res2 = invoke_curate(*eval_args(ARITHMETIC, out2, urls))
    assert res2.exit_code == 0, res2.stderr
    assert "160 new rollouts" in res2.stdout and "0 errors" in res2.stdout
    assert RolloutStore(out2).rollouts()["error"].null_count() == 160
    gone = next(line for line in res2.stderr.splitlines() if f"replica {urls[1]}" in line)
    assert ": 0 requests, 0 rollouts" in gone and "rested" in gone
