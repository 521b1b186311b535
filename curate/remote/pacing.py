"""Request and token pacing: stay under a requests-per-minute and a tokens-per-minute
limit by waiting before a request, not by drawing 429s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class TokenBucket:
    """Refills `per_minute / 60` units a second up to one second's worth; may go into
    debt so that a request costing more than the capacity still passes (then waits)."""

    def __init__(
        self, per_minute: float, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._updated = clock()
        self._lock = asyncio.Lock()  # FIFO: waiters are served in arrival order

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    async def take(self, amount: float) -> float:
        """Spend `amount`, waiting until the bucket holds min(amount, capacity); returns
        the seconds waited."""
        async with self._lock:
            self._refill()
            need = min(amount, self.capacity)
            waited = 0.0
            if self.level < need:
                waited = (need - self.level) / self.rate
                await self._sleep(waited)
                self._refill()
            self.level -= amount
            return waited

    def refund(self, amount: float) -> None:
        """Give back what a request did not use (its estimate was an upper bound)."""
        if amount > 0:
            self._refill()
            self.level = min(self.capacity, self.level + amount)


class Pacer:
    """Both limits at once: one request, and its estimated tokens, per `take`."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.requests = (
            TokenBucket(requests_per_minute, clock=clock, sleep=sleep)
            if requests_per_minute
            else None
        )
        self.tokens = (
            TokenBucket(tokens_per_minute, clock=clock, sleep=sleep) if tokens_per_minute else None
        )

    @property
    def counts_tokens(self) -> bool:
        return self.tokens is not None

    async def take(self, tokens: float) -> float:
        """Wait for a request slot and `tokens` (an upper bound); returns seconds waited."""
        waited = 0.0
        if self.requests is not None:
            waited += await self.requests.take(1)
        if self.tokens is not None:
            waited += await self.tokens.take(tokens)
        return waited

    def refund(self, tokens: float) -> None:
        """Give back the tokens a request did not use of what `take` reserved."""
        if self.tokens is not None:
            self.tokens.refund(tokens)
