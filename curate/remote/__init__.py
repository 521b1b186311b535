"""The remote-call core: what every caller of a remote HTTP service needs.

Retries with jittered backoff that honour `Retry-After` (`retry`), request and token
pacing (`pacing`), a concurrency limit that halves on 429 storms and grows back
(`concurrency`), a watch for an endpoint that has gone away or refuses everything
(`health`), one attempt loop that ties these together around a caller's own send
and parse (`caller`), a bridge that streams results of async work on a background
loop to synchronous code (`bridge`), key scrubbing (`secrets`), and the settings every
client shares, with each client's declared defaults (`settings`).

Nothing here knows a provider: a caller brings its wire format and one hook that
says what an exception of its SDK means (`Classifier`). The OpenAI-compatible wire
format is `openai_wire`, which imports the openai SDK and so is not imported here.
"""

from __future__ import annotations

from curate.remote.bridge import first_error, run_pool, stream_from_loop
from curate.remote.caller import Attempt, Classifier, EndpointDown, RemoteCaller, Unreachable
from curate.remote.concurrency import AdaptiveConcurrency
from curate.remote.health import FailureStreak
from curate.remote.pacing import Pacer, TokenBucket
from curate.remote.retry import (
    CAUSES,
    CONNECTION,
    MALFORMED,
    RATE_LIMIT,
    SERVER_ERROR,
    TIMEOUT,
    GaveUp,
    Rejected,
    Retryable,
    RetryPolicy,
    exception_chain,
    is_name_resolution_failure,
    parse_retry_after,
    status_retry_cause,
)
from curate.remote.secrets import Secret, redact_url, scrub
from curate.remote.settings import RemoteSettings
from curate.remote.stats import RemoteStats

__all__ = [
    "CAUSES",
    "CONNECTION",
    "MALFORMED",
    "RATE_LIMIT",
    "SERVER_ERROR",
    "TIMEOUT",
    "AdaptiveConcurrency",
    "Attempt",
    "Classifier",
    "EndpointDown",
    "FailureStreak",
    "GaveUp",
    "Pacer",
    "Rejected",
    "RemoteCaller",
    "RemoteSettings",
    "RemoteStats",
    "RetryPolicy",
    "Retryable",
    "Secret",
    "TokenBucket",
    "Unreachable",
    "exception_chain",
    "first_error",
    "is_name_resolution_failure",
    "parse_retry_after",
    "redact_url",
    "run_pool",
    "scrub",
    "status_retry_cause",
    "stream_from_loop",
]
