"""Pacing buckets, the adaptive concurrency limit and the failure streak, on a fake clock."""

from __future__ import annotations

import asyncio

from curate.remote import AdaptiveConcurrency, FailureStreak, Pacer, TokenBucket
from tests.remote.conftest import FakeClock


def test_token_bucket_spends_its_burst_then_paces(clock: FakeClock) -> None:
    async def scenario() -> float:
        bucket = TokenBucket(600, clock=clock, sleep=clock.sleep)  # 10/s, burst of 10
        waited = 0.0
        for _ in range(30):
            waited += await bucket.take(1)
        return waited

    waited = asyncio.run(scenario())
    assert clock.sleeps[:1] and abs(waited - 2.0) < 1e-9  # 20 beyond the burst at 10/s
    assert abs(sum(clock.sleeps) - 2.0) < 1e-9


def test_token_bucket_lets_a_large_request_through_into_debt(clock: FakeClock) -> None:
    async def scenario() -> tuple[float, float]:
        bucket = TokenBucket(60, clock=clock, sleep=clock.sleep)  # 1/s, capacity 1
        first = await bucket.take(5)  # more than the capacity: passes, owes 4
        second = await bucket.take(1)  # waits until the debt is paid and 1 is there
        return first, second

    first, second = asyncio.run(scenario())
    assert first == 0.0 and abs(second - 5.0) < 1e-9


def test_pacer_refunds_unused_tokens(clock: FakeClock) -> None:
    async def scenario() -> float:
        pacer = Pacer(tokens_per_minute=600, clock=clock, sleep=clock.sleep)  # 10/s
        await pacer.take(10)
        pacer.refund(10)  # the request used nothing: the next one need not wait
        return await pacer.take(10)

    assert asyncio.run(scenario()) == 0.0
    assert not Pacer().counts_tokens


def test_pacer_without_limits_never_waits(clock: FakeClock) -> None:
    async def scenario() -> float:
        pacer = Pacer(clock=clock, sleep=clock.sleep)
        return sum([await pacer.take(1e9) for _ in range(100)])

    assert asyncio.run(scenario()) == 0.0 and not clock.sleeps


def test_concurrency_halves_once_per_storm_and_recovers(clock: FakeClock) -> None:
    async def scenario() -> None:
        lim = AdaptiveConcurrency(8, clock=clock)
        sent = [await lim.acquire() for _ in range(8)]
        clock.advance(1)
        assert [lim.on_rate_limited(t) for t in sent].count(True) == 1 and lim.current == 4
        for _ in range(8):
            await lim.release()
        clock.advance(1)
        assert lim.on_rate_limited(await lim.acquire()) and lim.current == 2
        await lim.release()
        for _ in range(100):
            lim.on_success()
        assert (lim.current, lim.cuts, lim.lowest) == (8, 2, 2)

    asyncio.run(scenario())


def test_concurrency_limit_blocks_until_a_release() -> None:
    async def scenario() -> list[str]:
        lim = AdaptiveConcurrency(2)
        order: list[str] = []

        async def job(name: str, hold: float) -> None:
            await lim.acquire()
            order.append(f"start {name}")
            await asyncio.sleep(hold)
            await lim.release()

        await asyncio.gather(job("a", 0.05), job("b", 0.05), job("c", 0.0))
        return order

    assert asyncio.run(scenario()) == ["start a", "start b", "start c"]


def test_failure_streak_needs_both_count_and_time(clock: FakeClock) -> None:
    streak = FailureStreak(3, 10.0, clock=clock)
    assert not any(streak.fail() for _ in range(50))  # many at once: not yet
    clock.advance(10)
    assert streak.fail() and streak.elapsed == 10
    streak.succeed()
    assert not streak.tripped and streak.failures == 0
    clock.advance(30)
    assert not streak.fail() and not streak.fail()  # two, though spread out
