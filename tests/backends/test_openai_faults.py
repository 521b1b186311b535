"""A misbehaving endpoint: a refused prompt, an endpoint that dies mid-run
or cannot be resolved, the n fallback's seeds, content-filtered completions. Against
the fake server and the fault proxy on loopback (fast)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("openai")

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    SamplingConfig,
)
from curate.backends.openai_api import open_openai
from curate.core.seeds import derive_seed
from curate.errors import RunError
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import FakeOpenAIServer, FaultProxy
from tests.backends.test_openai_cli import KEY, KEY_ENV, eval_args
from tests.conftest import invoke_curate, run_chat_eval

SAMPLING = SamplingConfig(temperature=1.0, max_tokens=8)
FAST = {"backoff_base": 0.02, "backoff_max": 0.2}
LONG = "What is 5 + 6? " + "Please think very carefully. " * 20  # past 200 chars


def requests_for(prompts: Sequence[str], n: int = 2) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            f"s{i}", [{"role": "user", "content": p}], n, 0, derive_seed(0, f"s{i}", 0)
        )
        for i, p in enumerate(prompts)
    ]


def arithmetic(count: int) -> list[str]:
    return [f"What is {i} + {i + 1}?" for i in range(count)]


def write_data(path: Path, questions: Sequence[str]) -> Path:
    rows = [{"id": f"q{i:03d}", "question": q, "answer": "0"} for i, q in enumerate(questions)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(autouse=True)
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# ------------------------------------------------------------------ a refused prompt


@pytest.mark.parametrize("where", [0, 3])
def test_a_prompt_too_long_becomes_its_error_rows_and_the_run_goes_on(where: int) -> None:
    prompts = arithmetic(8)
    prompts[where] = LONG
    with (
        FakeOpenAIServer(max_prompt_chars=200) as srv,
        open_openai("fake-model", base_url=srv.base_url, concurrency=4) as backend,
    ):
        out = backend.generate(requests_for(prompts, n=3), SAMPLING, "chat")
    bad = out[where]
    assert len(bad) == 3 and all(g.text is None for g in bad)
    assert all(
        (g.error or "").startswith("rejected: 400 This model's maximum context length is 200")
        for g in bad
    )
    good = [g for i, gens in enumerate(out) if i != where for g in gens]
    assert len(good) == 21 and all(g.error is None for g in good)
    assert backend.stats.rejected_rollouts == 3
    assert "3 rollouts rejected by the endpoint" in backend.stats.summary()
    assert backend.n_supported is True and backend.seed_supported is True


def test_a_400_for_every_request_still_stops_the_run_at_once() -> None:
    message = "Unrecognized request argument supplied: top_p"
    with (
        FakeOpenAIServer(reject_all=message) as srv,
        open_openai("fake-model", base_url=srv.base_url, concurrency=4, **FAST) as backend,
    ):
        start = time.monotonic()
        with pytest.raises(RunError, match=r"request rejected by http://127\.0\.0\.1:\d+/v1: 400"):
            backend.generate(requests_for(arithmetic(50), n=2), SAMPLING, "chat")
        assert time.monotonic() - start < 5
    # Two prompts tried (each with its n / seed probes), nothing more.
    assert len(srv.bodies) <= 8 and srv.statuses[200] == 0


def test_cli_keeps_going_past_a_refused_prompt(tmp_path: Path) -> None:
    data = write_data(tmp_path / "d.jsonl", [*arithmetic(5), LONG, *arithmetic(4)])
    out = tmp_path / "run"
    with FakeOpenAIServer(api_key=KEY, max_prompt_chars=200) as srv:
        res = invoke_curate(*eval_args(data, out, srv.base_url))
    assert res.exit_code == 0, res.stderr
    assert "40 new rollouts" in res.stdout and "4 errors" in res.stdout
    assert "4 rollouts rejected by the endpoint" in res.stderr
    frame = RolloutStore(out).rollouts()
    errors = frame.filter(pl.col("error").is_not_null())
    assert set(errors["sample_id"]) == {"q005"} and errors["score"].null_count() == 4
    assert all("maximum context length" in e for e in errors["error"])


# ------------------------------------------------------------------ an endpoint that goes away


class _StopsAfter:
    """A streaming backend that hands back `good` results, then fails."""

    def __init__(self, good: int) -> None:
        self.good = good

    def info(self) -> BackendInfo:
        return BackendInfo(model="m", has_chat_template=True)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]:
        raise NotImplementedError

    def stream(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> Iterator[tuple[int, list[Generation]] | None]:
        for index, req in enumerate(requests[: self.good]):
            yield index, [Generation(text="1") for _ in range(req.n)]
        raise RunError("lost the endpoint")


def test_what_finished_reaches_disk_before_a_stop(tmp_path: Path) -> None:
    prompts = {f"s{i}": [{"role": "user", "content": "q"}] for i in range(30)}
    refs = dict.fromkeys(prompts, "1")
    with pytest.raises(RunError, match="lost the endpoint"):
        run_chat_eval(_StopsAfter(7), tmp_path / "run", prompts, refs, runs=2, sampling=SAMPLING)
    frame = RolloutStore(tmp_path / "run").rollouts()
    # All 7 finished requests, although less than FLUSH_SECONDS had passed.
    assert frame.height == 14 and frame["score"].null_count() == 0


def test_an_endpoint_that_dies_mid_run_stops_it_and_a_resume_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("curate.remote.caller.OUTAGE_SECONDS", 1.0)
    data = write_data(tmp_path / "d.jsonl", arithmetic(60))
    out = tmp_path / "run"
    with FakeOpenAIServer(api_key=KEY) as srv:
        proxy = FaultProxy(srv.url, delay_s=0.05).start()
        threading.Timer(0.8, proxy.stop).start()  # the endpoint goes away mid-run
        start = time.monotonic()
        res = invoke_curate(*eval_args(data, out, proxy.base_url))
        elapsed = time.monotonic() - start
        assert res.exit_code == 1, res.stdout + res.stderr
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "lost http://127.0.0.1:" in lines[0], res.stderr
        assert "attempts in a row failed to connect" in lines[0] and "resume" in lines[0]
        assert elapsed < 15
        stored = RolloutStore(out).rollouts()
        assert 0 < stored.height < 240 and stored["error"].null_count() == stored.height
        # Every rollout the endpoint returned before it went is on disk.
        returned = sum(k for _, k in proxy.completed)
        assert returned - 16 <= stored.height <= returned  # at most 4 requests in transit

        again = invoke_curate(*eval_args(data, out, srv.base_url))
    assert again.exit_code == 0, again.stderr
    assert f"{240 - stored.height} new rollouts" in again.stdout
    assert f"({stored.height} already stored)" in again.stdout
    assert RolloutStore(out).rollouts().height == 240


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_an_unresolvable_host_stops_at_once_and_says_how_to_point_elsewhere(
    transport: str,
) -> None:
    url = "http://curate-no-such-host.invalid/v1"
    with open_openai("m", base_url=url, transport=transport) as backend:
        start = time.monotonic()
        with pytest.raises(RunError) as info:
            backend.generate(requests_for(arithmetic(5)), SAMPLING, "chat")
        assert time.monotonic() - start < 5  # not a minute of retries
    message = str(info.value)
    assert message.startswith("cannot reach http://curate-no-such-host.invalid/v1: connection")
    assert "--base-url (or OPENAI_BASE_URL)" in message and "\n" not in message
    assert backend.stats.requests == 1


def test_a_refused_connection_at_the_start_says_how_to_point_elsewhere() -> None:
    from tests.backends.fault_proxy import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    with (
        open_openai("m", base_url=url, max_retries=1, **FAST) as backend,
        pytest.raises(RunError, match=r"--base-url \(or OPENAI_BASE_URL\)"),
    ):
        backend.generate(requests_for(arithmetic(3)), SAMPLING, "chat")


# ------------------------------------------------------------------ seeds and content filters


@pytest.mark.parametrize("behaviour", ["reject_n", "ignore_n"])
def test_each_rollout_stores_the_seed_of_its_own_request(tmp_path: Path, behaviour: str) -> None:
    data = write_data(tmp_path / "d.jsonl", arithmetic(6))
    out = tmp_path / "run"
    with FakeOpenAIServer(api_key=KEY, **{behaviour: True}) as srv:
        res = invoke_curate(*eval_args(data, out, srv.base_url, "--seed", 11))
        # The requests that produced a rollout: the rejected n > 1 ones did not.
        sent = [b.get("seed") for b in srv.bodies if behaviour == "ignore_n" or "n" not in b]
    assert res.exit_code == 0, res.stderr
    frame = RolloutStore(out).rollouts()
    want = [
        derive_seed(11, s, r) for s, r in zip(frame["sample_id"], frame["rollout_idx"], strict=True)
    ]
    assert frame["seed"].to_list() == want and frame["seed"].n_unique() == 24
    assert sorted(want) == sorted(sent)  # each the seed its own request carried


def test_content_filtered_completions_are_counted_and_marked(tmp_path: Path) -> None:
    data = write_data(tmp_path / "d.jsonl", arithmetic(6))
    out = tmp_path / "run"
    with FakeOpenAIServer(api_key=KEY, content_filter="What is 2 + 3?") as srv:
        res = invoke_curate(*eval_args(data, out, srv.base_url))
    assert res.exit_code == 0, res.stderr
    assert "4 completions stopped by the content filter" in res.stderr
    frame = RolloutStore(out).rollouts()
    flagged = frame.filter(pl.col("finish_reason") == "content_filter")
    assert set(flagged["sample_id"]) == {"q002"} and flagged.height == 4
    assert flagged["completion"].to_list() == [""] * 4
