"""Retry classification helpers and the backoff policy."""

from __future__ import annotations

import random
import socket
import time

import pytest

from curate.remote import (
    CAUSES,
    Retryable,
    RetryPolicy,
    exception_chain,
    is_name_resolution_failure,
    parse_retry_after,
)


def test_backoff_doubles_within_jitter_and_caps() -> None:
    policy = RetryPolicy(backoff_base=0.5, backoff_max=4.0)
    rng = random.Random(1)
    fault = Retryable("server_error", "503")
    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        delays = [policy.delay(fault, attempt, rng) for _ in range(50)]
        assert all(cap / 2 <= d <= cap for d in delays), (attempt, delays)


def test_retry_after_is_waited_on_with_a_little_jitter_and_capped() -> None:
    policy = RetryPolicy(backoff_base=0.5, retry_after_max=10.0)
    rng = random.Random(2)
    told = Retryable("rate_limit", "429", retry_after=3.0)
    assert all(3.0 <= policy.delay(told, 1, rng) <= 3.3 for _ in range(50))
    greedy = Retryable("rate_limit", "429", retry_after=600.0)
    assert 10.0 <= policy.delay(greedy, 1, rng) <= 11.0


def test_retry_after_header_forms_with_a_fixed_now() -> None:
    now = 1_700_000_000.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert parse_retry_after({"retry-after": date}, now=lambda: now) == 30.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"retry-after": "-5"}) == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after({"retry-after-ms": "x", "retry-after": "2"}) == 2.0


def test_exception_chain_and_dns_detection() -> None:
    try:
        try:
            raise socket.gaierror(-2, "Name or service not known")
        except OSError as inner:
            raise ConnectionError("connect failed") from inner
    except ConnectionError as outer:
        chain = exception_chain(outer)
        assert [type(e) for e in chain] == [ConnectionError, socket.gaierror]
        assert is_name_resolution_failure(outer)
    assert not is_name_resolution_failure(ConnectionRefusedError(111, "refused"))

    class WithOsError(Exception):  # aiohttp keeps the resolver's error as `os_error`
        os_error = socket.gaierror(-3, "Temporary failure in name resolution")

    assert is_name_resolution_failure(WithOsError())


def test_causes_are_the_five_counted_ones() -> None:
    assert CAUSES == ("rate_limit", "server_error", "timeout", "connection", "malformed")


@pytest.mark.parametrize("cause", CAUSES)
def test_retryable_keeps_its_cause(cause: str) -> None:
    fault = Retryable(cause, "msg", 1.0)
    assert (fault.cause, fault.message, fault.retry_after, fault.unresolved) == (
        cause,
        "msg",
        1.0,
        False,
    )
