"""What an OpenAI-compatible endpoint accepts, learned from its answers: whether it
takes n > 1 (else one request per rollout), `seed` (else sampling without per-rollout
seeds), and `max_tokens` (newer chat models want `max_completion_tokens`).

Each is learned at most once per backend, from the first answer that shows it: a
usable answer to a request that had it, a 400/422 that goes away when the request is
sent again without it (a probe), or fewer choices than asked for (n ignored). A
refusal that no capability explains is the request's own (`refused_alone`) or the
run's end; the backend decides which.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from curate.backends.base import Generation
from curate.core.prompts import Mode
from curate.remote import MALFORMED, Rejected, Retryable
from curate.remote.openai_wire import Choice

log = logging.getLogger("curate.backends.openai_api")

# Rejections that may only mean "this endpoint does not take n > 1 or seed".
CAPABILITY_STATUSES = (400, 422)
# Rejections that may be about one request alone (too long a prompt, say): once the
# endpoint has accepted others, they become that request's error rows.
PER_REQUEST_STATUSES = (400, 413, 422)


class Redo(Exception):
    """The endpoint's capabilities were learned meanwhile: plan the request again."""


class PromptRejected(Exception):
    """A rejection that may concern this request alone (see PER_REQUEST_STATUSES)."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.detail)
        self.rejected = rejected


def refused_alone(rejected: Rejected) -> bool:
    """Whether a refusal no capability explains may concern its request alone."""
    return rejected.status in PER_REQUEST_STATUSES


@dataclass
class Capabilities:
    """What the endpoint accepts (None: not known yet). Kept across `stream` calls."""

    n_supported: bool | None = None
    seed_supported: bool | None = None
    # Newer chat models refuse `max_tokens` and want `max_completion_tokens`.
    max_completion_tokens: bool = False
    accepted: bool = False  # some request got a usable answer
    # Whether the endpoint fills each choice's `token_ids` when asked
    # (`return_token_ids`, vLLM): learned from the first answer, which has the field
    # (null) on a vLLM server; never asked of an endpoint that has not shown it.
    token_ids: bool | None = None

    @property
    def settled(self) -> bool:
        return self.n_supported is not None and self.seed_supported is not None

    @property
    def max_tokens_key(self) -> str:
        return "max_completion_tokens" if self.max_completion_tokens else "max_tokens"

    def seed_to_send(self, seed: int | None) -> int | None:
        return seed if self.seed_supported is not False else None

    def learn_limit_key(self, rejected: Rejected, mode: Mode) -> bool:
        """Whether a refusal asks for `max_completion_tokens` (now learned: redo)."""
        if (
            mode == "chat"
            and not self.max_completion_tokens
            and "max_completion_tokens" in rejected.detail
        ):
            self.max_completion_tokens = True
            log.warning("the endpoint wants max_completion_tokens instead of max_tokens")
            return True
        return False

    def variants(self, n: int, seed: int | None) -> list[tuple[int, int | None]]:
        """The (n, seed) variants of a refused request that would tell which unknown
        capability the endpoint refuses, in the order to try them."""
        variants: list[tuple[int, int | None]] = []
        if seed is not None and self.seed_supported is None:
            variants.append((n, None))
        if n > 1 and self.n_supported is None:
            variants.append((1, seed))
            if seed is not None and self.seed_supported is None:
                variants.append((1, None))
        return variants

    def refuses(self, n: int, seed: int | None) -> bool:
        """Whether what is known now rules out a request with this n and seed."""
        return (n > 1 and self.n_supported is False) or (
            seed is not None and self.seed_supported is False
        )

    def learn_from_variant(self, n: int, seed: int | None, n2: int, seed2: int | None) -> None:
        """Variant (n2, seed2) of a refused (n, seed) request was answered."""
        if seed is not None and seed2 is None:
            self.seed_supported = False
            log.warning("the endpoint rejects `seed`: sampling without per-rollout seeds")
        if n2 < n:
            self.n_supported = False
            log.warning("the endpoint rejects n > 1: sending one request per rollout")

    def learn_token_ids(self, choices: list[Choice]) -> bool:
        """Learn from a usable answer whether the endpoint knows `token_ids`; True when
        it was just learned that it does (the answer may be asked for again with them)."""
        if self.token_ids is not None or not choices:
            return False
        self.token_ids = all(c.knows_token_ids for c in choices)
        return self.token_ids

    def learn_from_answer(self, choices: list[Choice], n: int, seed: int | None) -> list[Choice]:
        """The choices to keep of a usable answer to a request for n; Retryable for
        too few when n is known to be honoured (or n was 1)."""
        if len(choices) < n:
            if self.n_supported is not None or n == 1:
                raise Retryable(MALFORMED, f"response has {len(choices)} of {n} choices")
            # The endpoint answered n > 1 with fewer choices: it ignores n.
            self.n_supported = False
            log.warning("the endpoint ignores n > 1: sending one request per rollout")
        else:
            choices = choices[:n]
            if n > 1:
                self.n_supported = True
        if seed is not None and self.seed_supported is None:
            self.seed_supported = True
        self.accepted = True
        return choices


Attempts = Callable[[int, int | None], Awaitable[list[Generation]]]


class Prober:
    """Sends the variants of a refused request, one probe at a time."""

    def __init__(self, capabilities: Capabilities, on_probe: Callable[[], None]) -> None:
        self.caps = capabilities
        self.on_probe = on_probe  # counts each probe request
        self.lock = asyncio.Lock()

    async def probe(
        self,
        attempts: Attempts,
        n: int,
        seed: int | None,
        rejected: Rejected,
        refusal: Callable[[Rejected], Exception],
    ) -> list[Generation]:
        """A 400 for a request with n > 1 or a seed: find out whether the endpoint
        refuses one of those (then remember it) or the request itself (`refusal`).
        `attempts(n, seed)` sends one variant (raising Rejected for a refusal)."""
        variants = self.caps.variants(n, seed)
        if not variants:
            raise refusal(rejected)
        async with self.lock:
            # Another request may have found out while this one waited.
            if self.caps.refuses(n, seed):
                raise Redo
            for n2, seed2 in variants:
                self.on_probe()
                try:
                    gens = await attempts(n2, seed2)
                except Rejected as again:
                    if again.status not in CAPABILITY_STATUSES:
                        raise refusal(again) from None
                    continue
                if any(g.error is not None for g in gens):
                    return gens  # transient faults to the end: nothing learned
                self.caps.learn_from_variant(n, seed, n2, seed2)
                return gens
        raise refusal(rejected)
