"""An endpoint pool of two real vLLM OpenAI-compatible servers (CPU build, the bundled
tiny model, 0.25 GiB KV cache each) on loopback: both serve a `curate eval` with two
--base-url; then one is stopped, and the next eval goes on through the other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("vllm")

from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import VLLMServer
from tests.conftest import ARITHMETIC, TINY_MODEL, invoke_curate

pytestmark = pytest.mark.slow

MODEL = str(TINY_MODEL)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VLLMServer]]:
    """Two servers, started together (their start-ups overlap), stopped at the end."""
    if not (TINY_MODEL / "config.json").is_file():
        pytest.skip(f"{TINY_MODEL} is not there yet")
    logs = tmp_path_factory.mktemp("vllm-pool")
    pair = [VLLMServer(MODEL, log_path=logs / f"server{i}.log") for i in (0, 1)]
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: s.start(timeout=400), pair))
        yield pair
    finally:
        for server in pair:
            server.stop()


def eval_args(data: Path, out: Path, urls: list[str]) -> list[object]:
    flags = [part for url in urls for part in ("--base-url", url)]
    return [
        "eval", data, "--backend", "openai", "--model", MODEL, *flags,
        "--runs", 4, "--max-tokens", 16, "--out", out, "--quiet", "--concurrency", 16,
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
