"""Run-level counters of a remote caller."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from curate.remote.concurrency import AdaptiveConcurrency
from curate.remote.retry import CAUSES


@dataclass
class RemoteStats:
    """What the core counts for every remote caller (all of its calls)."""

    requests: int = 0  # attempts sent, retries included
    retries: Counter[str] = field(default_factory=Counter)  # cause -> retries
    concurrency_cuts: int = 0
    lowest_concurrency: int | None = None
    rate_limit_wait_s: float = 0.0

    @property
    def total_retries(self) -> int:
        return sum(self.retries.values())

    def note_limiter(self, limiter: AdaptiveConcurrency) -> None:
        """Add one run's concurrency cuts (a limiter lives for one run)."""
        if limiter.cuts:
            self.concurrency_cuts += limiter.cuts
            low, prev = limiter.lowest, self.lowest_concurrency
            self.lowest_concurrency = low if prev is None else min(prev, low)

    def retry_line(self) -> str:
        """'R requests, N retries (cause n, ...)'."""
        causes = ", ".join(f"{c} {self.retries[c]}" for c in CAUSES if self.retries[c])
        line = f"{self.requests} requests, {self.total_retries} retries"
        return f"{line} ({causes})" if causes else line

    def concurrency_line(self) -> str:
        """', concurrency cut Kx on 429s (lowest L)', or '' without a cut."""
        if not self.concurrency_cuts:
            return ""
        return (
            f", concurrency cut {self.concurrency_cuts}x on 429s (lowest {self.lowest_concurrency})"
        )
