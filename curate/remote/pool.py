"""Endpoint pools: several replicas of one model behind one caller.

Each attempt goes to the replica with the fewest requests in flight ("least
outstanding requests", the policy of Envoy's and NGINX's least-request balancers):
a replica that answers more slowly keeps more requests and so gets fewer new ones,
without any tuning. A replica that fails `failures` attempts in a row (a connection
error, a timeout or a 5xx; not a 4xx, which is the request's own fault, nor a 429) is
*rested*: skipped for a back-off period (`rest_s`, doubling on each consecutive
rest up to `max_rest_s`), then tried again with one request ("half-open", as a
circuit breaker does); a success closes it. When every replica rests, the one whose
rest ends first still gets the attempt: the caller's own retry and outage rules
then decide, as for a single endpoint.

Nothing here sends anything: a caller asks `pick()` for a replica, and tells
`finished()` how the attempt went. Single-threaded (one asyncio loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from curate.remote.secrets import redact_url

# Consecutive failed attempts that rest a replica.
REST_AFTER_FAILURES = 3
# The first rest, and the longest (each consecutive rest doubles the last).
REST_SECONDS = 5.0
MAX_REST_SECONDS = 60.0


@dataclass
class Replica:
    """One endpoint of a pool and what it did."""

    url: str
    index: int
    outstanding: int = 0  # attempts in flight
    attempts: int = 0  # attempts sent
    ok: int = 0  # attempts answered usably (any answer that is not a replica fault)
    failures: int = 0  # attempts that were the replica's fault
    rollouts: int = 0  # rollouts in its usable answers
    rests: int = 0  # times it was rested
    streak: int = 0  # failures in a row
    rest_until: float = 0.0  # monotonic time its current rest ends (0: not resting)
    probing: bool = False  # its rest ended: one attempt decides
    consecutive_rests: int = 0

    def resting(self, now: float) -> bool:
        return now < self.rest_until


class EndpointPool:
    """Least-outstanding-requests choice among replicas, with a circuit breaker."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        failures: int = REST_AFTER_FAILURES,
        rest_s: float = REST_SECONDS,
        max_rest_s: float = MAX_REST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("an endpoint pool needs at least one URL")
        self.replicas = [Replica(url, i) for i, url in enumerate(urls)]
        self.failures = failures
        self.rest_s = rest_s
        self.max_rest_s = max_rest_s
        self._clock = clock
        self.started_at: float | None = None
        self.ended_at: float | None = None

    def __len__(self) -> int:
        return len(self.replicas)

    def pick(self) -> Replica:
        """The replica for the next attempt, counted as in flight until `finished`."""
        now = self._clock()
        if self.started_at is None:
            self.started_at = now
        ready = [r for r in self.replicas if not r.resting(now)]
        # A replica whose rest just ended takes one attempt at a time until it answers.
        ready = [r for r in ready if not (r.probing and r.outstanding)] or ready
        if ready:
            chosen = min(ready, key=lambda r: (r.outstanding, r.attempts, r.index))
        else:
            chosen = min(self.replicas, key=lambda r: (r.rest_until, r.outstanding, r.index))
        if chosen.rest_until and not chosen.resting(now):
            chosen.probing = True
        chosen.outstanding += 1
        chosen.attempts += 1
        return chosen

    def finished(self, replica: Replica, *, fault: bool, rollouts: int = 0) -> None:
        """An attempt on `replica` ended: `fault` when it was the replica's failure
        (connection, timeout, 5xx); `rollouts` in a usable answer."""
        now = self._clock()
        self.ended_at = now
        replica.outstanding -= 1
        if not fault:
            replica.ok += 1
            replica.rollouts += rollouts
            replica.streak = 0
            replica.probing = False
            replica.consecutive_rests = 0
            replica.rest_until = 0.0
            return
        replica.failures += 1
        replica.streak += 1
        if replica.probing or replica.streak >= self.failures:
            replica.probing = False
            replica.streak = 0
            replica.rests += 1
            rest = min(self.max_rest_s, self.rest_s * 2**replica.consecutive_rests)
            replica.consecutive_rests += 1
            replica.rest_until = now + rest

    @property
    def elapsed(self) -> float:
        if self.started_at is None or self.ended_at is None:
            return 0.0
        return max(0.0, self.ended_at - self.started_at)

    def lines(self) -> list[str]:
        """One line per replica: its URL (no credentials), requests, rollouts and their
        rate over the pool's busy time, failures and rests."""
        seconds = self.elapsed
        out = []
        for r in self.replicas:
            rate = f"{r.rollouts / seconds:.1f} rollouts/s" if seconds > 0 else "- rollouts/s"
            line = (
                f"replica {redact_url(r.url)}: {r.ok} requests, {r.rollouts} rollouts, "
                f"{rate}, {r.failures} errors"
            )
            if r.rests:
                line += f", rested {r.rests}x"
            out.append(line)
        return out
