"""Fakes for the remote-call core: a clock that only moves when told, and a sleep
that moves it instead of waiting."""

from __future__ import annotations

import asyncio

import pytest


class FakeClock:
    """Monotonic time that advances only through `sleep` or `advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # still yield to the loop, as a real sleep would


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
