"""The openai backend against a fake OpenAI-compatible server and the fault proxy
(loopback only, fast). The real vLLM server is in test_openai_server.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openai")

from curate.backends.base import GenerationRequest, SamplingConfig, StreamingBackend
from curate.backends.openai_api import open_openai
from curate.core.seeds import derive_seed
from curate.errors import RunError, UsageError
from curate.remote import (
    AdaptiveConcurrency,
    Retryable,
    TokenBucket,
    parse_retry_after,
    redact_url,
    scrub,
)
from curate.remote.openai_wire import completion_token_split, parse_body, split_total
from tests.backends.fault_proxy import (
    FakeOpenAIServer,
    FaultProxy,
    arithmetic_answer,
    assert_one_retry_per_fault,
)

SAMPLING = SamplingConfig(temperature=1.0, max_tokens=8)
KEY = "sk-unit-test-0123456789abcdef"
FAST = {"backoff_base": 0.02, "backoff_max": 0.2}  # quick retries for tests


def requests_for(count: int, n: int = 4, chat: bool = True) -> list[GenerationRequest]:
    out = []
    for i in range(count):
        text = f"What is {i} + {i + 1}?"
        prompt: Any = [{"role": "user", "content": text}] if chat else f"Q: {text}\nA:"
        out.append(
            GenerationRequest(
                sample_id=f"s{i}", prompt=prompt, n=n, first_run=0, seed=derive_seed(0, f"s{i}", 0)
            )
        )
    return out


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(latency_s=0.005) as srv:
        yield srv


# ------------------------------------------------------------------ pure helpers


def test_split_total_adds_up_and_follows_weights() -> None:
    assert split_total(10, [1, 1, 1]) == [4, 3, 3]
    assert sum(split_total(7, [5, 0, 1])) == 7
    assert split_total(0, [1, 2]) == [0, 0]
    assert split_total(5, []) == []
    # Length-cut choices used max_tokens; the rest share what is left by text length.
    assert completion_token_split(20, ["aaaa", "b", "x" * 16], ["stop", "stop", "length"], 8) == [
        9,
        3,
        8,
    ]
    assert sum(completion_token_split(9, ["a", "bb"], [None, None], 8)) == 9


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= (parse_retry_after({"retry-after": when}) or 0) <= 31


def test_scrub_and_redact_hide_the_key() -> None:
    line = scrub(f"bad key {KEY}\nBearer {KEY} and sk-abc***wxyz", KEY)
    assert KEY not in line and "sk-abc" not in line and "\n" not in line
    assert redact_url("http://user:pw@127.0.0.1:8000/v1/?key=x") == "http://127.0.0.1:8000/v1"


def test_parse_body_rejects_malformed_bodies() -> None:
    for body in (
        b'{"choices": [',
        b"[]",
        b'{"choices": []}',
        b'{"id": 1}',
        b'{"choices": [{"index": 0}]}',
    ):
        with pytest.raises(Retryable) as info:
            parse_body(body, "chat")
        assert info.value.cause == "malformed"
    choices, p, c = parse_body(
        b'{"choices": [{"index": 1, "text": "b"}, {"index": 0, "text": "a"}],'
        b' "usage": {"prompt_tokens": 3, "completion_tokens": 2}}',
        "completion",
    )
    assert [ch.text for ch in choices] == ["a", "b"] and (p, c) == (3, 2)


def test_adaptive_concurrency_halves_once_per_storm_and_recovers() -> None:
    async def scenario() -> None:
        lim = AdaptiveConcurrency(16)
        sent = [await lim.acquire() for _ in range(16)]
        # 16 requests in flight all get a 429: one congestion event, not 16.
        cuts = [lim.on_rate_limited(t) for t in sent]
        assert cuts.count(True) == 1 and lim.current == 8
        for _ in range(16):
            await lim.release()
        later = await lim.acquire()
        assert lim.on_rate_limited(later) and lim.current == 4  # a new 429 cuts again
        await lim.release()
        for _ in range(200):
            lim.on_success()
        assert lim.current == 16 and lim.cuts == 2 and lim.lowest == 4

    asyncio.run(scenario())


def test_token_bucket_paces_requests() -> None:
    async def scenario() -> float:
        bucket = TokenBucket(per_minute=1200)  # 20/s, burst of 20
        start = time.monotonic()
        for _ in range(40):
            await bucket.take(1)
        return time.monotonic() - start

    assert 0.8 <= asyncio.run(scenario()) <= 3.0


# ------------------------------------------------------------------ against the fake server


@pytest.mark.parametrize("mode", ["chat", "completion"])
def test_modes_n_seed_and_usage(server: FakeOpenAIServer, mode: str) -> None:
    reqs = requests_for(6, n=4, chat=mode == "chat")
    with open_openai("fake-model", base_url=server.base_url, concurrency=4) as backend:
        assert isinstance(backend, StreamingBackend)
        out = backend.generate(reqs, SAMPLING, mode)  # type: ignore[arg-type]
    assert [len(g) for g in out] == [4] * 6
    assert len(server.bodies) == 6  # one request per prompt, n=4 each
    assert all(b["n"] == 4 and b["max_tokens"] == 8 for b in server.bodies)
    assert {b["seed"] for b in server.bodies} == {r.seed for r in reqs}
    for req, gens in zip(reqs, out, strict=True):
        right = arithmetic_answer(str(req.prompt))
        assert all(g.error is None and g.attempts == 1 for g in gens)
        assert all(g.text in (right, str(int(right or 0) + 1)) for g in gens)
        # Each rollout's prompt is the request's (sent once, the same for every choice),
        # as the offline engine stores it.
        text = req.prompt[0]["content"] if mode == "chat" else req.prompt
        assert [g.prompt_tokens for g in gens] == [len(text)] * 4
        # A total for n choices, no per-choice counts and no tokenizer for the model:
        # shares of the total, marked as estimates.
        assert sum(g.completion_tokens or 0 for g in gens) == sum(len(g.text or "") for g in gens)
        assert {g.token_count_source for g in gens} == {"estimated"}
        assert all(g.latency_s is not None and g.latency_s > 0 for g in gens)
    assert backend.n_supported is True and backend.seed_supported is True
    assert backend.stats.total_retries == 0 and backend.stats.requests == 6


def test_concurrency_is_bounded(server: FakeOpenAIServer) -> None:
    server.latency_s = 0.05
    with open_openai("fake-model", base_url=server.base_url, concurrency=5) as backend:
        out = backend.generate(requests_for(40, n=1), SAMPLING, "chat")
    assert len(out) == 40 and server.max_in_flight == 5


def test_results_stream_as_they_finish() -> None:
    slow = "What is 0 + 1?"  # the first request is slow; the rest must not wait for it
    with (
        FakeOpenAIServer(latency_s=lambda p: 2.0 if slow in p else 0.01) as srv,
        open_openai("fake-model", base_url=srv.base_url, concurrency=8) as backend,
    ):
        reqs = requests_for(20, n=2)
        backend.n_supported = backend.seed_supported = True  # skip the lone first request
        start = time.monotonic()
        stream = backend.stream(reqs, SAMPLING, "chat")
        arrivals = [(item[0], time.monotonic() - start) for item in stream if item is not None]
    assert sorted(i for i, _ in arrivals) == list(range(20))
    assert arrivals[0][1] < 1.0 and arrivals[-1][0] == 0 and arrivals[-1][1] >= 1.9


def test_abandoned_stream_stops_its_thread(server: FakeOpenAIServer) -> None:
    import threading

    server.latency_s = 0.05
    with open_openai("fake-model", base_url=server.base_url, concurrency=2) as backend:
        stream = backend.stream(requests_for(200, n=1), SAMPLING, "chat")
        while next(stream) is None:  # skip heartbeats until a result arrives
            pass
        start = time.monotonic()
        stream.close()
        assert time.monotonic() - start < 5
    assert not any(t.name == "curate-openai" for t in threading.enumerate())
    assert len(server.bodies) < 50


@pytest.mark.parametrize("behaviour", ["reject_n", "ignore_n"])
def test_endpoint_without_n_gets_one_request_per_rollout(behaviour: str) -> None:
    with (
        FakeOpenAIServer(**{behaviour: True}) as srv,
        open_openai("fake-model", base_url=srv.base_url, concurrency=4, seed=7) as backend,
    ):
        reqs = [
            GenerationRequest(
                sample_id=f"s{i}",
                prompt=f"What is {i} + 2?",
                n=3,
                first_run=2,
                seed=derive_seed(7, f"s{i}", 2),
            )
            for i in range(10)
        ]
        out = backend.generate(reqs, SAMPLING, "completion")
    assert [len(g) for g in out] == [3] * 10
    assert all(g.error is None for gens in out for g in gens)
    assert backend.n_supported is False
    # Detected once: only the first request was refused (with and without its seed).
    assert srv.statuses[400] == (2 if behaviour == "reject_n" else 0)
    single = [b for b in srv.bodies if "n" not in b]
    # An endpoint that ignores n answered the first request with one rollout: kept.
    assert len(single) == (30 if behaviour == "reject_n" else 29)
    want = {derive_seed(7, f"s{i}", r) for i in range(10) for r in (2, 3, 4)}
    # Each rollout its own derived seed (one probe went without a seed).
    assert {b.get("seed") for b in srv.bodies} - {None} == want


def test_endpoint_rejecting_seed_is_detected_once() -> None:
    with (
        FakeOpenAIServer(reject_seed=True) as srv,
        open_openai("fake-model", base_url=srv.base_url, concurrency=4) as backend,
    ):
        out = backend.generate(requests_for(10, n=2), SAMPLING, "chat")
    assert all(g.error is None for gens in out for g in gens)
    assert backend.seed_supported is False and backend.n_supported is True
    assert srv.statuses[400] == 1 and sum("seed" in b for b in srv.bodies) == 1


def test_endpoint_wanting_max_completion_tokens_gets_it() -> None:
    with (
        FakeOpenAIServer(want_max_completion_tokens=True) as srv,
        open_openai("fake-model", base_url=srv.base_url, concurrency=4) as backend,
    ):
        out = backend.generate(requests_for(10, n=2), SAMPLING, "chat")
    assert all(g.error is None for gens in out for g in gens)
    assert srv.statuses[400] == 1 and srv.bodies[-1]["max_completion_tokens"] == 8
    assert backend.n_supported and backend.seed_supported  # not mistaken for those


@pytest.mark.parametrize(
    ("model", "key", "needle"),
    [
        ("no-such-model", KEY, "model 'no-such-model' not found at http://127.0.0.1:"),
        ("fake-model", "sk-wrong-key-999999999", "authentication failed at http://127.0.0.1:"),
    ],
)
def test_refused_requests_stop_the_run_at_once(
    monkeypatch: pytest.MonkeyPatch, model: str, key: str, needle: str
) -> None:
    monkeypatch.setenv("UNIT_KEY", key)
    with (
        FakeOpenAIServer(api_key=KEY) as srv,
        open_openai(
            model, base_url=srv.base_url, api_key_env="UNIT_KEY", concurrency=4, **FAST
        ) as backend,
    ):
        start = time.monotonic()
        with pytest.raises(RunError) as info:
            backend.generate(requests_for(50, n=2), SAMPLING, "chat")
        assert time.monotonic() - start < 5
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert key not in message and KEY not in message
    assert len(srv.bodies) == 1  # not retried, and nothing else was sent


def test_the_key_goes_in_the_header_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAIServer(api_key=KEY) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)  # honoured like the SDK does
        with open_openai("fake-model", concurrency=2) as backend:
            out = backend.generate(requests_for(3, n=1), SAMPLING, "chat")
            assert KEY not in repr(backend.__dict__) and KEY not in repr(backend.info())
    assert all(g.error is None for gens in out for g in gens)
    assert set(srv.auth_headers) == {f"Bearer {KEY}"}


def test_missing_named_key_variable_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CURATE_NO_SUCH_VAR", raising=False)
    with (
        pytest.raises(UsageError, match="CURATE_NO_SUCH_VAR"),
        open_openai("m", base_url="http://127.0.0.1:9/v1", api_key_env="CURATE_NO_SUCH_VAR"),
    ):
        pass


# ------------------------------------------------------------------ faults


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_every_injected_fault_is_retried_and_counted(
    server: FakeOpenAIServer, transport: str
) -> None:
    shares = {
        "429_retry_after": 0.05,
        "429": 0.05,
        "500": 0.05,
        "503": 0.05,
        "drop": 0.05,
        "stall": 0.03,
        "truncate": 0.05,
        "no_choices": 0.05,
    }
    with (
        FaultProxy(server.url, shares=shares, seed=3, stall_s=1.5, retry_after="0.2") as proxy,
        open_openai(
            "fake-model",
            base_url=proxy.base_url,
            concurrency=8,
            timeout=0.75,
            max_retries=4,
            transport=transport,
            **FAST,
        ) as backend,
    ):
        out = backend.generate(requests_for(60, n=2), SAMPLING, "chat")
    assert all(g.error is None for gens in out for g in gens)
    assert proxy.total_injected >= 10
    assert_one_retry_per_fault(backend.stats, proxy)
    # attempts per rollout = 1 + its request's retries; they add up to the faults.
    assert sum(gens[0].attempts - 1 for gens in out) == proxy.total_injected
    if proxy.injected["429"] + proxy.injected["429_retry_after"]:
        assert backend.stats.concurrency_cuts >= 1


def test_retry_after_is_honoured(server: FakeOpenAIServer) -> None:
    with (
        FaultProxy(
            server.url, shares={"429_retry_after": 1.0}, max_faults_per_body=1, retry_after="1"
        ) as proxy,
        open_openai("fake-model", base_url=proxy.base_url, **FAST) as backend,
    ):
        start = time.monotonic()
        out = backend.generate(requests_for(1, n=1), SAMPLING, "chat")
        elapsed = time.monotonic() - start
    assert out[0][0].error is None and out[0][0].attempts == 2
    assert 1.0 <= elapsed < 3.0  # waited as told, not the 0.02 s backoff


def test_faults_that_never_clear_become_error_rows(server: FakeOpenAIServer) -> None:
    reqs = requests_for(8, n=2)
    doomed = "What is 3 + 4?"
    with (
        FaultProxy(server.url, fail_forever=[doomed]) as proxy,
        open_openai("fake-model", base_url=proxy.base_url, max_retries=2, **FAST) as backend,
    ):
        out = backend.generate(reqs, SAMPLING, "chat")
    bad = [gens for req, gens in zip(reqs, out, strict=True) if doomed in str(req.prompt)]
    assert len(bad) == 1 and len(bad[0]) == 2
    assert all(
        g.text is None and g.attempts == 3 and "server_error: 503" in (g.error or "")
        for g in bad[0]
    )
    assert proxy.persistent == 3 and backend.stats.failed_rollouts == 2
    good = [g for gens in out for g in gens if g.error is None]
    assert len(good) == 14


def test_stalls_past_the_timeout_end_as_timeouts() -> None:
    with (
        FakeOpenAIServer(latency_s=1.0) as srv,
        open_openai(
            "fake-model", base_url=srv.base_url, timeout=0.3, max_retries=1, **FAST
        ) as backend,
    ):
        start = time.monotonic()
        out = backend.generate(requests_for(2, n=1), SAMPLING, "chat")
    assert time.monotonic() - start < 3
    assert all("timeout" in (g.error or "") and g.attempts == 2 for gens in out for g in gens)
    assert backend.stats.retries["timeout"] == 2


def test_rate_limits_pace_the_requests(server: FakeOpenAIServer) -> None:
    with open_openai(
        "fake-model", base_url=server.base_url, concurrency=16, requests_per_minute=1200
    ) as backend:
        start = time.monotonic()
        backend.generate(requests_for(40, n=1), SAMPLING, "chat")
        elapsed = time.monotonic() - start
    assert elapsed >= 0.8 and backend.stats.rate_limit_wait_s > 0


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_an_endpoint_that_never_answers_stops_the_run(transport: str) -> None:
    from tests.backends.fault_proxy import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with open_openai("m", base_url=url, max_retries=2, transport=transport, **FAST) as backend:
        start = time.monotonic()
        with pytest.raises(RunError, match=r"cannot reach http://127\.0\.0\.1:\d+/v1: connection"):
            backend.generate(requests_for(20, n=2), SAMPLING, "chat")
        assert time.monotonic() - start < 5
    assert backend.stats.requests == 3  # the first request and its retries, nothing else


def test_token_rate_limit_paces_by_estimated_tokens(server: FakeOpenAIServer) -> None:
    # Each request is estimated at prompt chars / 4 + n * max_tokens = ~4 + 8 tokens.
    with open_openai(
        "fake-model", base_url=server.base_url, concurrency=16, tokens_per_minute=6000
    ) as backend:  # 100 tokens/s
        start = time.monotonic()
        out = backend.generate(requests_for(20, n=1), SAMPLING, "chat")
        elapsed = time.monotonic() - start
    assert all(g.error is None for gens in out for g in gens)
    assert 1.0 <= elapsed < 5 and backend.stats.rate_limit_wait_s > 0
