"""Async work on a background event loop, its results streamed to synchronous code.

The engine is synchronous; remote calls are best made concurrently on asyncio. The
bridge runs a coroutine on a loop in its own thread and hands each result over a
queue as soon as it exists, with a heartbeat (None) while nothing is ready, so the
consumer can write what it holds. Abandoning the stream cancels the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from curate.errors import CurateError, RunError

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 - an item of work

Emit = Callable[[T], None]


@dataclass
class _Channel(Generic[T]):
    """One stream: its queue and how the consumer reaches its loop (to cancel it)."""

    results: queue.Queue[tuple[str, Any]] = field(default_factory=queue.Queue)
    started: threading.Event = field(default_factory=threading.Event)
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None


def stream_from_loop(
    main: Callable[[Emit[T]], Coroutine[Any, Any, None]],
    *,
    thread_name: str,
    on_crash: Callable[[BaseException], BaseException],
    label: str = "background",
    heartbeat_s: float = 0.5,
) -> Iterator[T | None]:
    """Run `main(emit)` on a new loop in a daemon thread; yield what it emits, in
    order, and None every `heartbeat_s` while nothing comes.

    A CurateError from `main` is raised to the consumer as it is; anything else
    (cancellation included) as `on_crash(exc)`, which must not leak secrets.
    Closing the iterator early cancels `main` and waits (bounded) for the thread.
    """
    channel: _Channel[T] = _Channel()

    async def root() -> None:
        channel.loop = asyncio.get_running_loop()
        channel.task = asyncio.current_task()
        channel.started.set()
        await main(lambda item: channel.results.put(("result", item)))

    def thread_main() -> None:
        try:
            asyncio.run(root())
            channel.results.put(("done", None))
        except CurateError as exc:
            channel.results.put(("error", exc))
        except BaseException as exc:  # reported to the consumer
            channel.results.put(("error", on_crash(exc)))
        finally:
            channel.started.set()

    thread = threading.Thread(target=thread_main, name=thread_name, daemon=True)
    thread.start()
    try:
        while True:
            try:
                # A timeout keeps Ctrl-C responsive in the consuming thread.
                kind, payload = channel.results.get(timeout=heartbeat_s)
            except queue.Empty:
                if not thread.is_alive() and channel.results.empty():
                    raise RunError(f"the {label}'s worker thread stopped") from None
                yield None
                continue
            if kind == "result":
                yield payload
            elif kind == "error":
                raise payload
            else:
                return
    finally:
        _stop(channel, thread)


def _stop(channel: _Channel[Any], thread: threading.Thread) -> None:
    if thread.is_alive() and channel.started.wait(timeout=5):
        loop, task = channel.loop, channel.task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
    thread.join(timeout=30)


async def run_pool(items: list[I], workers: int, work: Callable[[I], Awaitable[None]]) -> None:
    """`work(item)` for every item, in order of start, `workers` at a time; the first
    failure cancels the rest and is raised as itself (see `first_error`)."""
    pending = list(reversed(items))  # pop() from the end keeps the order

    async def worker() -> None:
        while pending:
            await work(pending.pop())

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(len(pending), workers)):
                group.create_task(worker())
    except BaseExceptionGroup as group_error:
        raise first_error(group_error) from None


def first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first real error in a task group's failure (a CurateError before the rest)."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if isinstance(exc, CurateError):
            return exc
    return leaves[0] if leaves else RunError("remote calls failed")
