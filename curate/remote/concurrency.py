"""A concurrency limit that backs off on rate limiting and recovers (AIMD)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable


class AdaptiveConcurrency:
    """A concurrency limit that halves on a 429 and grows back by one per window.

    Only a 429 for a request sent after the last cut cuts again: a burst of 429s from
    requests that were already in flight is one congestion signal, not many.
    """

    def __init__(self, maximum: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.active = 0
        self.cuts = 0
        self.lowest = maximum
        self._clock = clock
        self._last_cut = -math.inf
        self._cond = asyncio.Condition()

    @property
    def current(self) -> int:
        return max(1, int(self.limit))

    async def acquire(self) -> float:
        """Take a slot; returns the send time (for `on_rate_limited`)."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.active < self.current)
            self.active += 1
        return self._clock()

    async def release(self) -> None:
        async with self._cond:
            self.active -= 1
            self._cond.notify(max(1, self.current - self.active))

    def on_success(self) -> None:
        # Additive increase: about +1 per `limit / 2` successes (TCP-like, a bit quicker).
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 2.0 / self.limit)

    def on_rate_limited(self, sent_at: float) -> bool:
        """Halve the limit unless this request predates the last cut; True if cut."""
        if sent_at < self._last_cut:
            return False
        self.limit = max(1.0, self.limit / 2)
        self._last_cut = self._clock()
        self.cuts += 1
        self.lowest = min(self.lowest, self.current)
        return True
