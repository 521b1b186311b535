"""What a failed remote call means, and how long to wait before trying it again.

A caller's classifier turns its SDK's exceptions into `Retryable` (a transient fault,
with one of the `CAUSES`) or `Rejected` (a refusal that retrying cannot fix);
`RetryPolicy` spaces the retries (jittered exponential backoff, or what the server
asked for in `Retry-After`, up to a cap).
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import socket
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

# Fault causes, as counted in `RemoteStats.retries` (in this order in summaries).
RATE_LIMIT: Final = "rate_limit"
SERVER_ERROR: Final = "server_error"
TIMEOUT: Final = "timeout"
CONNECTION: Final = "connection"
MALFORMED: Final = "malformed"
CAUSES: Final = (RATE_LIMIT, SERVER_ERROR, TIMEOUT, CONNECTION, MALFORMED)


class Retryable(Exception):
    """A transient fault: try again after a pause.

    `unresolved`: the host name did not resolve (before anything answered, a typo in
    the URL rather than a blip, so the caller stops instead of retrying).
    """

    def __init__(
        self,
        cause: str,
        message: str,
        retry_after: float | None = None,
        *,
        unresolved: bool = False,
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message
        self.retry_after = retry_after
        self.unresolved = unresolved


class Rejected(Exception):
    """A refusal (a 4xx other than a plain 429) that retrying cannot fix."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class GaveUp(Exception):
    """The last retry failed too: `fault` is the last fault, after `attempts` attempts."""

    def __init__(self, fault: Retryable, attempts: int) -> None:
        super().__init__(fault.message)
        self.fault = fault
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many retries, and how far apart."""

    max_retries: int = 8
    backoff_base: float = 0.5  # the first retry waits about this long, then doubling
    backoff_max: float = 30.0
    retry_after_max: float = 120.0  # a server asking for longer is not waited on past this

    def delay(self, fault: Retryable, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if fault.retry_after is not None:
            wait = min(fault.retry_after, self.retry_after_max)
            # A little jitter so that clients told the same time do not return together.
            return wait + rng.uniform(0, 0.1 * max(wait, self.backoff_base))
        cap = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return rng.uniform(cap / 2, cap)


# Statuses besides 5xx worth another attempt: the server timed the request out or it
# collided with another.
RETRY_STATUSES: Final = frozenset({408, 409})


def status_retry_cause(status: int, *, permanent: Collection[int] = ()) -> str | None:
    """Why an HTTP error status is worth retrying (RATE_LIMIT for 429, SERVER_ERROR for
    5xx, 408 and 409), or None when retrying cannot help (other statuses, and those in
    `permanent`: a server's way of saying an endpoint is missing)."""
    if status in permanent:
        return None
    if status == 429:
        return RATE_LIMIT
    if status >= 500 or status in RETRY_STATUSES:
        return SERVER_ERROR
    return None


def parse_retry_after(headers: Any, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    if headers is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first (a few levels at most)."""
    chain = [exc]
    while len(chain) < 8:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def is_name_resolution_failure(exc: BaseException) -> bool:
    """Whether a connection failure came from DNS (the host name does not resolve)."""
    for link in exception_chain(exc):
        if isinstance(link, socket.gaierror):
            return True
        # Transports that keep the resolver's error as an attribute, not a cause.
        inner = getattr(link, "os_error", None)
        if isinstance(inner, socket.gaierror):
            return True
    return False
