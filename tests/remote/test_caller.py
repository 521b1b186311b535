"""The attempt loop with fake async calls that fail N times, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from curate.remote import (
    Attempt,
    EndpointDown,
    GaveUp,
    Rejected,
    RemoteCaller,
    RemoteStats,
    Retryable,
    RetryPolicy,
    Unreachable,
)
from tests.remote.conftest import FakeClock


class Boom(Exception):
    """A fake SDK's error: `kind` says what it stands for."""

    def __init__(self, kind: str, retry_after: float | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.retry_after = retry_after


def classify(exc: BaseException) -> Exception | None:
    """The fake SDK's hook: a few lines, like a provider's `should_retry`."""
    if not isinstance(exc, Boom):
        return None
    if exc.kind == "400":
        return Rejected(400, "bad request")
    if exc.kind == "429":
        return Retryable("rate_limit", "429", exc.retry_after)
    if exc.kind == "dns":
        return Retryable("connection", "no such host", unresolved=True)
    return Retryable(exc.kind, exc.kind)


def failing(kinds: list[str], answer: str = "ok") -> Callable[[], Awaitable[str]]:
    """A send that raises Boom(kind) for each of `kinds` in turn, then answers."""
    left = list(kinds)

    async def send() -> str:
        await asyncio.sleep(0)
        if left:
            raise Boom(left.pop(0))
        return answer

    return send


def make(clock: FakeClock, **kw: Any) -> RemoteCaller:
    kw.setdefault("policy", RetryPolicy(max_retries=3, backoff_base=1.0, backoff_max=8.0))
    return RemoteCaller(
        classify,
        concurrency=kw.pop("concurrency", 4),
        timeout=kw.pop("timeout", 5.0),
        stats=RemoteStats(),
        sleep=clock.sleep,
        clock=clock,
        **kw,
    )


def keep(answer: str, attempt: Attempt) -> tuple[str, int]:
    return answer, attempt.number


def test_transient_faults_are_retried_and_counted(clock: FakeClock) -> None:
    caller = make(clock)
    got = asyncio.run(caller.call(failing(["server_error", "timeout", "malformed"]), keep))
    assert got == ("ok", 4)
    assert caller.stats.requests == 4 and caller.stats.total_retries == 3
    assert dict(caller.stats.retries) == {"server_error": 1, "timeout": 1, "malformed": 1}
    # Jittered exponential backoff: about 1, 2, 4 s.
    bounds = [(0.5, 1), (1, 2), (2, 4)]
    assert all(lo <= s <= hi for s, (lo, hi) in zip(clock.sleeps, bounds, strict=True))


def test_the_last_retry_gives_up_with_the_last_fault(clock: FakeClock) -> None:
    caller = make(clock)
    with pytest.raises(GaveUp) as info:
        asyncio.run(caller.call(failing(["server_error"] * 10), keep))
    assert info.value.attempts == 4 and info.value.fault.cause == "server_error"
    assert caller.stats.requests == 4 and caller.stats.total_retries == 3


def test_a_rejection_is_raised_at_once(clock: FakeClock) -> None:
    caller = make(clock)
    with pytest.raises(Rejected):
        asyncio.run(caller.call(failing(["400"]), keep))
    assert caller.stats.requests == 1 and not clock.sleeps and caller.answered


def test_an_unknown_exception_is_a_bug_and_propagates(clock: FakeClock) -> None:
    async def send() -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        asyncio.run(make(clock).call(send, keep))


def test_an_unusable_answer_is_retried(clock: FakeClock) -> None:
    seen: list[str] = []

    def picky(answer: str, attempt: Attempt) -> int:
        seen.append(answer)
        if attempt.number < 3:
            raise Retryable("malformed", "half a body")
        return attempt.number

    caller = make(clock)
    assert asyncio.run(caller.call(failing([]), picky)) == 3
    assert caller.stats.retries["malformed"] == 2 and len(seen) == 3


def test_retry_after_is_honoured(clock: FakeClock) -> None:
    async def send_once_limited() -> str:
        if not clock.sleeps:
            raise Boom("429", retry_after=7.0)
        return "ok"

    caller = make(clock)
    assert asyncio.run(caller.call(send_once_limited, keep)) == ("ok", 2)
    assert 7.0 <= clock.sleeps[0] <= 7.7
    assert caller.limiter.cuts == 1  # a 429 also halves the concurrency


def test_core_defaults_for_timeouts_and_os_connection_errors() -> None:
    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    async def refused() -> str:
        raise ConnectionRefusedError(111, "Connection refused")

    caller = RemoteCaller(classify, policy=RetryPolicy(max_retries=0), concurrency=1, timeout=0.05)
    with pytest.raises(GaveUp) as info:
        asyncio.run(caller.call(slow, keep))
    assert info.value.fault.cause == "timeout"
    with pytest.raises(GaveUp) as info:
        asyncio.run(caller.call(refused, keep))
    assert info.value.fault.cause == "connection" and not caller.answered


def test_an_endpoint_gone_for_a_while_stops_the_calls(clock: FakeClock) -> None:
    caller = make(clock, policy=RetryPolicy(max_retries=100, backoff_base=1.0, backoff_max=2.0))

    async def gone() -> str:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(EndpointDown) as info:
        asyncio.run(caller.call(gone, keep))
    down = info.value
    assert down.failures >= 5 and down.seconds >= 10.0 and "refused" in str(down)
    assert caller.stats.requests == down.failures  # not one attempt more


def test_an_answer_resets_the_outage_watch(clock: FakeClock) -> None:
    caller = make(clock, policy=RetryPolicy(max_retries=3, backoff_base=4.0, backoff_max=4.0))

    async def scenario() -> None:
        for _ in range(5):  # 3 refused attempts (about 6-12 s) then an answer, 5 times
            assert await caller.call(failing(["connection"] * 3), keep) == ("ok", 4)

    asyncio.run(scenario())
    assert clock.now - 1000.0 > 20 and caller.stats.retries["connection"] == 15


def test_dns_failure_before_any_answer_stops_at_once(clock: FakeClock) -> None:
    caller = make(clock)
    with pytest.raises(Unreachable):
        asyncio.run(caller.call(failing(["dns"]), keep))
    assert caller.stats.requests == 1 and not clock.sleeps
    # Once the endpoint has answered, a DNS failure is a blip: retried.
    assert asyncio.run(caller.call(failing([]), keep)) == ("ok", 1)
    assert asyncio.run(caller.call(failing(["dns", "dns"]), keep)) == ("ok", 3)
    # Also when it answered an earlier caller (the owner says so).
    later = make(clock, answered=True)
    assert asyncio.run(later.call(failing(["dns"]), keep)) == ("ok", 2)


def test_concurrency_is_bounded_by_the_limiter() -> None:
    in_flight = 0
    most = 0

    async def send() -> str:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return "ok"

    async def scenario() -> None:
        caller = RemoteCaller(classify, policy=RetryPolicy(), concurrency=3, timeout=1.0)
        await asyncio.gather(*(caller.call(send, keep) for _ in range(12)))

    asyncio.run(scenario())
    assert most == 3


def test_finish_adds_the_run_s_concurrency_cuts(clock: FakeClock) -> None:
    caller = make(clock)
    asyncio.run(caller.call(failing(["429"]), keep))
    caller.finish()
    assert caller.stats.concurrency_cuts == 1 and caller.stats.lowest_concurrency == 2
    assert "concurrency cut 1x on 429s (lowest 2)" in caller.stats.concurrency_line()
    assert caller.stats.retry_line() == "2 requests, 1 retries (rate_limit 1)"
