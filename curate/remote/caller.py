"""One attempt loop for every remote call: a concurrency slot, pacing, a timeout,
the caller's classification of what went wrong, backoff, and a watch for an endpoint
that has gone away.

The caller brings `send` (one attempt on the wire, body read) and `handle` (parse the
answer; raise `Retryable` for an unusable one), plus one `Classifier` for its SDK's
exceptions: the shape of inspect_ai's model providers, which share one retry loop and
differ only in a `should_retry` hook.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from curate.remote.concurrency import AdaptiveConcurrency
from curate.remote.health import FailureStreak
from curate.remote.pacing import Pacer, Sleep
from curate.remote.retry import (
    CONNECTION,
    RATE_LIMIT,
    TIMEOUT,
    GaveUp,
    Rejected,
    Retryable,
    RetryPolicy,
)
from curate.remote.stats import RemoteStats

R = TypeVar("R")
T = TypeVar("T")

# What an exception of the caller's SDK means: Retryable, Rejected, or None for "not
# mine" (then the core's defaults apply: timeouts and OS-level connection errors are
# transient, anything else is a bug and propagates as it is).
Classifier = Callable[[BaseException], Exception | None]

# An endpoint is taken for gone after this many connection failures in a row, spread
# over at least this many seconds (a server restart of a few seconds is ridden out).
OUTAGE_FAILURES = 5
OUTAGE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Attempt:
    """What `handle` learns about the attempt whose answer it parses."""

    number: int  # 1 for the first try
    latency_s: float  # from sending to the whole body


class EndpointDown(Exception):
    """Every attempt for a while failed to connect: the endpoint is gone."""

    def __init__(self, failures: int, seconds: float, last: Retryable) -> None:
        super().__init__(f"{failures} attempts in a row over {seconds:.0f} s: {last.message}")
        self.failures = failures
        self.seconds = seconds
        self.last = last


class Unreachable(Exception):
    """The host name does not resolve, and nothing at it ever answered."""

    def __init__(self, last: Retryable) -> None:
        super().__init__(last.message)
        self.last = last


def _default_fault(exc: BaseException) -> Exception:
    if isinstance(exc, TimeoutError):
        return Retryable(TIMEOUT, "request timed out")
    if isinstance(exc, ConnectionError):
        return Retryable(CONNECTION, f"connection error ({type(exc).__name__}: {exc})")
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


class RemoteCaller:
    """Runs attempts for one batch of work (make one per run: the concurrency limit
    and the outage watch belong to a run); counts into `stats`, which may be shared."""

    def __init__(
        self,
        classify: Classifier,
        *,
        policy: RetryPolicy,
        concurrency: int,
        timeout: float,
        pacer: Pacer | None = None,
        stats: RemoteStats | None = None,
        outage: FailureStreak | None = None,
        rng: random.Random | None = None,
        answered: bool = False,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.classify = classify
        self.policy = policy
        self.timeout = timeout
        self.limiter = AdaptiveConcurrency(concurrency, clock=clock)
        self.pacer = pacer or Pacer()
        self.stats = stats if stats is not None else RemoteStats()
        self.outage = outage or FailureStreak(OUTAGE_FAILURES, OUTAGE_SECONDS, clock=clock)
        self.rng = rng or random.Random()
        # Some attempt got an answer (any status): from this caller, or, as the owner
        # says, before it (a later round against the same endpoint).
        self.answered = answered
        self._sleep = sleep
        self._clock = clock

    async def call(
        self,
        send: Callable[[], Awaitable[R]],
        handle: Callable[[R, Attempt], T],
        *,
        cost: float = 1.0,
    ) -> T:
        """`handle(answer)` of the first attempt that gives a usable answer.

        Raises `Rejected` for a refusal (at once), `GaveUp` after the last retry,
        `EndpointDown` when attempts everywhere have failed to connect for a while,
        `Unreachable` when the host name does not resolve before anything answered.
        `cost` is the attempt's token estimate for the tokens-per-minute pacing.
        """
        number = 0
        while True:
            number += 1
            try:
                return await self._once(send, handle, cost, number)
            except Retryable as fault:
                self._watch(fault)
                if number > self.policy.max_retries:
                    raise GaveUp(fault, number) from None
                self.stats.retries[fault.cause] += 1
                await self._sleep(self.policy.delay(fault, number, self.rng))

    def _watch(self, fault: Retryable) -> None:
        if fault.cause != CONNECTION:
            return  # timeouts neither prove the endpoint gone nor alive
        if fault.unresolved and not self.answered:
            raise Unreachable(fault) from None
        if self.outage.fail():
            raise EndpointDown(self.outage.failures, self.outage.elapsed, fault) from None

    async def _once(
        self,
        send: Callable[[], Awaitable[R]],
        handle: Callable[[R, Attempt], T],
        cost: float,
        number: int,
    ) -> T:
        limiter = self.limiter
        await limiter.acquire()
        try:
            self.stats.rate_limit_wait_s += await self.pacer.take(cost)
            sent_at = self._clock()
            started = time.perf_counter()
            self.stats.requests += 1
            try:
                async with asyncio.timeout(self.timeout):
                    answer = await send()
            except Exception as exc:
                fault = self.classify(exc) or _default_fault(exc)
                if isinstance(fault, Rejected) or (
                    isinstance(fault, Retryable) and fault.cause not in (CONNECTION, TIMEOUT)
                ):
                    self._heard()
                if isinstance(fault, Retryable) and fault.cause == RATE_LIMIT:
                    limiter.on_rate_limited(sent_at)
                raise fault from None
            latency = time.perf_counter() - started
            self._heard()
        finally:
            await limiter.release()
        result = handle(answer, Attempt(number, latency))
        limiter.on_success()
        return result

    def _heard(self) -> None:
        """The endpoint answered (any status): it is there."""
        self.answered = True
        self.outage.succeed()

    def finish(self) -> None:
        """Add this run's concurrency cuts to the stats."""
        self.stats.note_limiter(self.limiter)
