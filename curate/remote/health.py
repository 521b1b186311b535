"""Telling a few failures from a dead (or uniformly refusing) endpoint."""

from __future__ import annotations

import time
from collections.abc import Callable


class FailureStreak:
    """Failures in a row, with no success between them.

    `tripped` once at least `count` have happened over at least `seconds`: both, so
    that neither a burst of in-flight requests failing together (many, at once) nor a
    single slow request's retries (few, spread out) is taken for an outage.
    """

    def __init__(
        self, count: int, seconds: float = 0.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.count = count
        self.seconds = seconds
        self.failures = 0
        self.first_at: float | None = None
        self._clock = clock

    def fail(self) -> bool:
        """Record a failure; True when the streak is long enough to give up."""
        now = self._clock()
        if self.first_at is None:
            self.first_at = now
        self.failures += 1
        return self.tripped

    def succeed(self) -> None:
        self.failures = 0
        self.first_at = None

    @property
    def tripped(self) -> bool:
        return (
            self.first_at is not None
            and self.failures >= self.count
            and self._clock() - self.first_at >= self.seconds
        )

    @property
    def elapsed(self) -> float:
        return 0.0 if self.first_at is None else self._clock() - self.first_at
