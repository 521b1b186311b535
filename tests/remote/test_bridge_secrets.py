"""The sync-to-async bridge, the worker pool, and key scrubbing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from curate.errors import RunError, UsageError
from curate.remote import Secret, first_error, redact_url, run_pool, scrub, stream_from_loop
from curate.remote.bridge import Emit


def crash(exc: BaseException) -> RunError:
    return RunError(f"crashed: {type(exc).__name__}")


def test_results_stream_in_order_with_heartbeats() -> None:
    async def main(emit: Emit[int]) -> None:
        for i in range(3):
            await asyncio.sleep(0.08)
            emit(i)

    items = list(stream_from_loop(main, thread_name="t-order", on_crash=crash, heartbeat_s=0.02))
    assert [i for i in items if i is not None] == [0, 1, 2]
    assert None in items  # heartbeats while nothing was ready


def test_a_curate_error_passes_and_anything_else_goes_through_on_crash() -> None:
    async def refuses(emit: Emit[int]) -> None:
        emit(1)
        raise UsageError("no")

    async def breaks(emit: Emit[int]) -> None:
        raise ValueError("secret detail")

    got: list[int | None] = []
    with pytest.raises(UsageError):
        for item in stream_from_loop(refuses, thread_name="t-err", on_crash=crash):
            got.append(item)
    assert got == [1]  # what was emitted before the error still arrives
    with pytest.raises(RunError, match="crashed: ValueError"):
        list(stream_from_loop(breaks, thread_name="t-crash", on_crash=crash))


def test_abandoning_the_stream_cancels_the_work_and_ends_the_thread() -> None:
    cancelled = threading.Event()

    async def forever(emit: Emit[int]) -> None:
        try:
            i = 0
            while True:
                emit(i)
                i += 1
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stream = stream_from_loop(forever, thread_name="t-abandon", on_crash=crash)
    assert next(stream) == 0
    start = time.monotonic()
    stream.close()
    assert time.monotonic() - start < 5 and cancelled.is_set()
    assert not any(t.name == "t-abandon" for t in threading.enumerate())


def test_pool_runs_everything_bounded_and_raises_the_curate_error_first() -> None:
    started: list[int] = []
    running = 0
    most = 0

    async def work(i: int) -> None:
        nonlocal running, most
        started.append(i)
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1

    asyncio.run(run_pool(list(range(10)), 3, work))
    assert started[:3] == [0, 1, 2] and sorted(started) == list(range(10)) and most == 3

    async def fails(i: int) -> None:
        await asyncio.sleep(0.01 * i)
        if i == 1:
            raise RunError("stop")

    with pytest.raises(RunError, match="stop"):
        asyncio.run(run_pool([0, 1, 2], 3, fails))
    group = BaseExceptionGroup("g", [KeyError("a"), ExceptionGroup("h", [RunError("b")])])
    assert isinstance(first_error(group), RunError)


def test_scrub_hides_the_key_and_key_like_text_on_one_line() -> None:
    key = Secret("sk-test-abcdefghijklmnop")
    line = scrub(f"bad key sk-test-abcdefghijklmnop\nBearer xyz123 sk-abc***wxyz {'x' * 400}", key)
    assert "abcdefgh" not in line and "xyz123" not in line and "sk-abc" not in line
    assert "\n" not in line and len(line) == 300
    assert repr(key) == str(key) == "<secret>" and "sk-" not in f"{key}"
    assert scrub("abc", "abc") == "abc"  # too short to be a key: left alone
    assert redact_url("https://u:p@host.example/v1/?api_key=x") == "https://host.example/v1"
