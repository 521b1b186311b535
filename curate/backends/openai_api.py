"""Any OpenAI-compatible endpoint (a hosted API, `vllm serve`, ...) through the `openai` SDK.

This module holds the wire format only: request bodies, response parsing, what the
endpoint accepts (n > 1, `seed`, `max_tokens`; learned once, then worked around) and
what an SDK error means. Retries (jittered backoff, `Retry-After` honoured), pacing,
adaptive concurrency, the background loop that streams finished requests to the
synchronous engine, and key scrubbing are the remote-call core's (`curate.remote`).

A 4xx other than 429 stops the run with one line, once it is clear that the endpoint
does not merely refuse n > 1, `seed` or `max_tokens`, except a 400/413/422 for one
prompt (say, too long for the model's context) once the endpoint has accepted other
requests: that prompt's rollouts become error rows with the reason, and the run goes
on. An endpoint that stops answering for a while stops the run. The API key is read
from the environment and scrubbed from every message this module produces.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai  # a missing extra fails here, at backend selection

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    Prompt,
    SamplingConfig,
)
from curate.backends.openai_options import DEFAULT_KEY_ENV, OpenAIOptions
from curate.core.seeds import derive_seed
from curate.errors import RunError, UsageError
from curate.remote import (
    CAUSES,
    CONNECTION,
    MALFORMED,
    RATE_LIMIT,
    SERVER_ERROR,
    TIMEOUT,
    AdaptiveConcurrency,
    Attempt,
    EndpointDown,
    FailureStreak,
    GaveUp,
    Pacer,
    Rejected,
    RemoteCaller,
    RemoteStats,
    Retryable,
    RetryPolicy,
    Secret,
    TokenBucket,
    Unreachable,
    exception_chain,
    is_name_resolution_failure,
    parse_retry_after,
    redact_url,
    run_pool,
    scrub,
    status_retry_cause,
    stream_from_loop,
)
from curate.remote.bridge import Emit
from curate.remote.pool import EndpointPool

# The core's pieces that callers of this module have always imported from here.
__all__ = [
    "CAUSES",
    "AdaptiveConcurrency",
    "BackendStats",
    "ClientConfig",
    "OpenAIBackend",
    "TokenBucket",
    "classify",
    "completion_token_split",
    "open_openai",
    "parse_body",
    "parse_retry_after",
    "redact_url",
    "scrub",
    "split_total",
]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (vllm serve without --api-key) want some key; the SDK refuses none.
PLACEHOLDER_KEY = "EMPTY"
# Rejections that may only mean "this endpoint does not take n > 1 or seed".
_CAPABILITY_STATUSES = (400, 422)
# Rejections that may be about one request alone (too long a prompt, say): once the
# endpoint has accepted others, they become that request's error rows.
_PER_REQUEST_STATUSES = (400, 413, 422)
# So many requests rejected in a row, with no success between, means the endpoint now
# refuses everything (a model swapped mid-run, say): stop rather than fill the store
# with error rows. Large, so that a run of long prompts in a sorted data set passes.
REJECTION_STREAK = 64
# How to point the backend at a server when the endpoint cannot be reached.
_URL_HINT = (
    "to use a local server, point --base-url (or OPENAI_BASE_URL) at it, "
    "e.g. http://127.0.0.1:8000/v1 for `vllm serve`"
)
# The finish reason of a completion stopped by the provider's content filter.
CONTENT_FILTER = "content_filter"


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to talk to the endpoint. Holds no secret (the key is kept apart)."""

    base_url: str = DEFAULT_BASE_URL
    # A pool of replicas (curate/remote/pool.py); empty: `base_url` alone.
    base_urls: tuple[str, ...] = ()
    concurrency: int = 32
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    timeout: float = 120.0  # seconds per attempt, from sending to the whole body
    max_retries: int = 8
    backoff_base: float = 0.5  # first retry waits about this long, then doubling
    backoff_max: float = 30.0
    retry_after_max: float = 120.0  # a server asking for longer is not waited on past this
    transport: str = "auto"  # "aiohttp", "httpx", or auto: aiohttp when installed

    @property
    def urls(self) -> tuple[str, ...]:
        """Every endpoint of the run: the pool's, or `base_url` alone."""
        return self.base_urls or (self.base_url,)

    @property
    def where(self) -> str:
        """The endpoint(s) for messages, without credentials."""
        return ", ".join(redact_url(url) for url in self.urls)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.timeout <= 0:
            raise UsageError("--timeout must be positive")
        if self.max_retries < 0:
            raise UsageError("--max-retries must be 0 or more")
        if self.transport not in ("auto", "aiohttp", "httpx"):
            raise UsageError(f"unknown transport {self.transport!r} (auto, aiohttp or httpx)")
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be positive")


@dataclass
class BackendStats(RemoteStats):
    """Run-level counters (all requests of every `stream` call of one backend); the
    core counts requests, retries by cause, concurrency cuts and pacing waits."""

    failed_rollouts: int = 0  # rollouts stored as errors after their last retry
    capability_probes: int = 0  # extra requests made to learn about n / seed support
    rejected_rollouts: int = 0  # rollouts stored as errors: the endpoint refused the prompt
    content_filtered: int = 0  # completions the provider's content filter stopped

    def summary(self) -> str:
        line = self.retry_line()
        if self.failed_rollouts:
            line += f", {self.failed_rollouts} rollouts failed after retries"
        if self.rejected_rollouts:
            line += f", {self.rejected_rollouts} rollouts rejected by the endpoint"
        if self.content_filtered:
            line += f", {self.content_filtered} completions stopped by the content filter"
        return line + self.concurrency_line()


# --------------------------------------------------------------------------- faults


def classify(exc: BaseException) -> Exception | None:
    """What an SDK exception means: Retryable, Rejected, or None (not the SDK's)."""
    if isinstance(exc, openai.APIStatusError):
        status, detail = exc.status_code, _error_detail(exc)
        if status == 429 and _error_code(exc) == "insufficient_quota":
            return Rejected(status, detail)  # waiting will not add credit
        cause = status_retry_cause(status)
        if cause is None:
            return Rejected(status, detail)
        wait = parse_retry_after(exc.response.headers) if cause == RATE_LIMIT else None
        return Retryable(cause, f"{status} {detail}", wait)
    if isinstance(exc, openai.APIConnectionError | TimeoutError):
        chain = exception_chain(exc)
        # The SDK's aiohttp transport reports a dropped or refused connection as a
        # connect *timeout*: look at what aiohttp itself raised.
        dropped = any(
            type(e).__module__.startswith("aiohttp") and not isinstance(e, TimeoutError)
            for e in chain
        )
        if dropped or not isinstance(exc, openai.APITimeoutError | TimeoutError):
            root = chain[-1]
            detail = f"{type(root).__name__}: {root}" if root is not exc else str(exc)
            unresolved = is_name_resolution_failure(exc)
            return Retryable(CONNECTION, f"connection error ({detail})", unresolved=unresolved)
        return Retryable(TIMEOUT, "request timed out")
    if isinstance(exc, openai.APIResponseValidationError):
        return Retryable(MALFORMED, "malformed response")
    return None


def replica_fault(exc: BaseException) -> bool:
    """Whether a failed attempt counts against the replica that got it: it did not
    answer (connection, timeout) or failed (5xx). A 4xx is the request's own fault
    and a 429 a rate limit, which resting the replica would not cure faster."""
    fault = classify(exc)
    if fault is None:
        return isinstance(exc, TimeoutError | ConnectionError)
    return isinstance(fault, Retryable) and fault.cause in (CONNECTION, TIMEOUT, SERVER_ERROR)


def _error_detail(exc: openai.APIStatusError) -> str:
    """The server's own message for a failed request, if it sent one."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    with contextlib.suppress(Exception):
        text = exc.response.text.strip()
        if text:
            return text
    return exc.response.reason_phrase or ""


def _error_code(exc: openai.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code") is not None:
            return str(inner.get("code"))
    return None


class _Redo(Exception):
    """The endpoint's capabilities were learned meanwhile: plan the request again."""


class _PromptRejected(Exception):
    """A rejection that may concern this request alone (see _PER_REQUEST_STATUSES)."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.detail)
        self.rejected = rejected


# --------------------------------------------------------------------------- helpers


def prompt_chars(prompt: Prompt) -> int:
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(str(m.get("content") or "")) for m in prompt)


def split_total(total: int, weights: Sequence[float]) -> list[int]:
    """`total` split in proportion to `weights`, as integers summing to `total`."""
    if not weights:
        return []
    wsum = float(sum(weights))
    if wsum <= 0:
        weights, wsum = [1.0] * len(weights), float(len(weights))
    raw = [total * w / wsum for w in weights]
    parts = [math.floor(x) for x in raw]
    # Largest remainders get the leftover units, so the parts add up exactly.
    order = sorted(range(len(raw)), key=lambda i: raw[i] - parts[i], reverse=True)
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def completion_token_split(
    total: int, texts: Sequence[str], finish: Sequence[str | None], max_tokens: int
) -> list[int]:
    """Per-choice completion tokens from a request's total: a choice cut at the length
    limit used max_tokens; the rest share what is left by text length."""
    long = [i for i, f in enumerate(finish) if f == "length"]
    is_long = set(long)
    rest = [i for i in range(len(texts)) if i not in is_long]
    if long and rest and len(long) * max_tokens <= total:
        out = [0] * len(texts)
        for i in long:
            out[i] = max_tokens
        for i, part in zip(
            rest,
            split_total(total - len(long) * max_tokens, [len(texts[i]) + 1 for i in rest]),
            strict=True,
        ):
            out[i] = part
        return out
    return split_total(total, [len(t) + 1 for t in texts])


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(slots=True)
class _Choice:
    index: int
    text: str
    finish_reason: str | None
    completion_tokens: int | None
    reasoning: str | None = None  # the server's reasoning field, when it separated it


# Where OpenAI-compatible servers put separated reasoning: vLLM (0.32) and SGLang
# `reasoning`, DeepSeek's API and older vLLM `reasoning_content`.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _reasoning_of(where: dict[str, Any]) -> str | None:
    for key in REASONING_FIELDS:
        value = where.get(key)
        if isinstance(value, str):
            return value
    return None


def parse_body(content: bytes, mode: Mode) -> tuple[list[_Choice], int | None, int | None]:
    """(choices by index, prompt tokens, completion tokens) of a 200 response body;
    raises _Retryable("malformed") for a body that is not a usable completion."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        raise Retryable(MALFORMED, "response body is not valid JSON") from None
    if not isinstance(data, dict):
        raise Retryable(MALFORMED, "response body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Retryable(MALFORMED, "response has no choices")
    out: list[_Choice] = []
    for pos, c in enumerate(choices):
        if not isinstance(c, dict):
            raise Retryable(MALFORMED, "response choice is not an object")
        if mode == "chat":
            message = c.get("message")
            if not isinstance(message, dict):
                raise Retryable(MALFORMED, "response choice has no message")
            text = message.get("content")
            text = "" if text is None else text  # e.g. a refusal: an (empty) answer
            reasoning = _reasoning_of(message)
        else:
            text = c.get("text")
            reasoning = _reasoning_of(c)
        if not isinstance(text, str):
            raise Retryable(MALFORMED, "response choice has no text")
        usage = c.get("usage")
        tokens = _int_or_none(usage.get("completion_tokens")) if isinstance(usage, dict) else None
        index = c.get("index")
        out.append(
            _Choice(
                index=index if isinstance(index, int) else pos,
                text=text,
                finish_reason=c.get("finish_reason"),
                completion_tokens=tokens,
                reasoning=reasoning,
            )
        )
    out.sort(key=lambda ch: ch.index)
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return out, None, None
    return (
        out,
        _int_or_none(usage.get("prompt_tokens")),
        _int_or_none(usage.get("completion_tokens")),
    )


# --------------------------------------------------------------------------- backend

_Result = tuple[int, list[Generation]]  # (index into the requests, its generations)


class OpenAIBackend:
    """Streams generations from an OpenAI-compatible endpoint; build it with `open_openai`."""

    def __init__(
        self,
        model: str,
        config: ClientConfig,
        api_key: Secret,
        *,
        key_env: str = DEFAULT_KEY_ENV,
        base_seed: int = 0,
    ) -> None:
        self.model = model
        self.config = config
        self.key_env = key_env
        self.base_seed = base_seed
        self.stats = BackendStats()
        # Kept across `stream` calls: a rested replica stays rested between chunks.
        self.pool = EndpointPool(config.urls)
        self._key = api_key
        # What the endpoint accepts, learned from the first request that shows it
        # (None: not known yet). Kept across `stream` calls.
        self.n_supported: bool | None = None
        self.seed_supported: bool | None = None
        self.reached = False  # some request got an HTTP answer (any status)
        self.accepted = False  # some request got a usable answer
        # Newer chat models refuse `max_tokens` and want `max_completion_tokens`.
        self.max_completion_tokens = False

    def info(self) -> BackendInfo:
        # A remote endpoint's template is not visible: chat unless told otherwise.
        return BackendInfo(
            model=self.model,
            has_chat_template=True,
            chat_template_sha256=None,
            extra={
                "base_url": redact_url(self.config.base_url),
                **(
                    {"base_urls": [redact_url(u) for u in self.config.urls]}
                    if len(self.pool) > 1
                    else {}
                ),
                "openai_sdk": openai.__version__,
            },
        )

    def scrub(self, text: str) -> str:
        # The placeholder is no secret, and blanking it would garble messages.
        key = None if self._key.reveal() == PLACEHOLDER_KEY else self._key
        return scrub(text, key)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]:
        """All requests' generations, in request order (built on `stream`)."""
        out: list[list[Generation]] = [[] for _ in requests]
        for item in self.stream(requests, sampling, mode):
            if item is not None:
                index, gens = item
                out[index] = gens
        return out

    def stream(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> Iterator[_Result | None]:
        """Yield (index, generations) as requests finish, None while waiting; stops the
        loop if abandoned."""
        if not requests:
            return
        todo = list(requests)

        async def main(emit: Emit[_Result]) -> None:
            await self._main(todo, sampling, mode, emit)

        yield from stream_from_loop(
            main, thread_name="curate-openai", on_crash=self._crash, label="openai backend"
        )

    def _crash(self, exc: BaseException) -> RunError:
        if isinstance(exc, asyncio.CancelledError):
            return RunError("generation was cancelled")
        # Anything else: one scrubbed line, never the key.
        first = self.scrub(str(exc) or type(exc).__name__)
        return RunError(f"openai backend failed: {type(exc).__name__}: {first}")

    async def _main(
        self,
        requests: list[GenerationRequest],
        sampling: SamplingConfig,
        mode: Mode,
        emit: Emit[_Result],
    ) -> None:
        cfg = self.config
        # One client per replica: the SDK binds a client to one base URL.
        clients = [
            openai.AsyncOpenAI(
                api_key=self._key.reveal(),
                base_url=url,
                max_retries=0,  # the core's, instead: counted, jittered, aware of 429 storms
                timeout=cfg.timeout,
                http_client=_http_client(cfg),
            )
            for url in cfg.urls
        ]
        try:
            await _Run(self, clients, sampling, mode, emit).execute(requests)
        finally:
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()


def _http_client(cfg: ClientConfig) -> Any:
    """The SDK's HTTP client: its aiohttp transport when installed (a quarter less CPU
    per request than httpx, which matters when client and server share the cores)."""
    # The SDK's own Limits class (httpx or httpx2, whichever this SDK version uses).
    from openai._base_client import DEFAULT_CONNECTION_LIMITS

    # The pool must hold every concurrent request, or requests would queue inside the
    # client, where our timeout would count their waiting time.
    size = cfg.concurrency + 8
    kwargs: dict[str, Any] = {
        "limits": type(DEFAULT_CONNECTION_LIMITS)(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=30.0
        ),
        "timeout": cfg.timeout,
    }
    if cfg.transport in ("auto", "aiohttp"):
        try:
            import aiohttp  # noqa: F401  (the SDK's aiohttp transport needs it)

            return openai.DefaultAioHttpClient(**kwargs)
        except (ImportError, RuntimeError):
            if cfg.transport == "aiohttp":
                raise UsageError("the aiohttp transport needs `pip install aiohttp`") from None
    return openai.DefaultAsyncHttpxClient(**kwargs)


class _Run:
    """One `stream` call on the background loop: requests planned for what the
    endpoint accepts, sent through the core's attempt loop, answers parsed."""

    def __init__(
        self,
        backend: OpenAIBackend,
        clients: Sequence[openai.AsyncOpenAI],
        sampling: SamplingConfig,
        mode: Mode,
        emit: Emit[_Result],
    ) -> None:
        self.b = backend
        self.cfg = cfg = backend.config
        self.stats = backend.stats
        self.sampling = sampling
        self.mode = mode
        self.emit = emit
        self.caller = RemoteCaller(
            classify,
            policy=RetryPolicy(
                max_retries=cfg.max_retries,
                backoff_base=cfg.backoff_base,
                backoff_max=cfg.backoff_max,
                retry_after_max=cfg.retry_after_max,
            ),
            concurrency=cfg.concurrency,
            timeout=cfg.timeout,
            pacer=Pacer(cfg.requests_per_minute, cfg.tokens_per_minute),
            stats=self.stats,
            answered=backend.reached,  # an earlier `stream` call heard from the endpoint
        )
        self.probe_lock = asyncio.Lock()
        self.rejections = FailureStreak(REJECTION_STREAK)
        self.pool = backend.pool
        # The replicas' endpoints, by the pool's replica index.
        self.endpoints = [
            client.chat.completions.with_raw_response
            if mode == "chat"
            else client.completions.with_raw_response
            for client in clients
        ]

    async def execute(self, requests: list[GenerationRequest]) -> None:
        pending = list(enumerate(requests))
        try:
            if self.b.n_supported is None or self.b.seed_supported is None:
                # The first request goes alone, so that an endpoint rejecting n > 1 or
                # seed is detected once, not by a burst of rejected requests.
                await self._first(pending)
            # More workers than slots: a worker sleeping before a retry holds no slot,
            # and the others keep the endpoint busy meanwhile.
            await run_pool(pending, 2 * self.cfg.concurrency, self._work)
        finally:
            self.b.reached = self.caller.answered
            self.caller.finish()

    async def _first(self, pending: list[tuple[int, GenerationRequest]]) -> None:
        """Send requests alone until one is not refused. A refusal of the first that
        the second shares (or with no second to try) is the endpoint refusing every
        request: stop. Otherwise it was that prompt's: its rows say why."""
        held: list[tuple[int, GenerationRequest]] = []
        refusal: Rejected | None = None
        while pending:
            index, req = pending.pop(0)
            try:
                gens = await self._request(req)
            except _PromptRejected as prompt_rejected:
                if refusal is not None or not pending:
                    raise self._fatal(refusal or prompt_rejected.rejected) from None
                held.append((index, req))
                refusal = prompt_rejected.rejected
                continue
            refused = all((g.error or "").startswith("connection") for g in gens)
            if refused and not self.caller.answered:
                # Nothing ever answered: a wrong URL or a server that is down. Stop,
                # rather than turn the whole data set into error rows.
                raise self._unreachable(gens[0].error or "")
            self.emit((index, gens))
            break
        for index, req in held:
            assert refusal is not None
            self.emit((index, self._rejected_rows(refusal, req.seed, req.n)))

    def _unreachable(self, detail: str) -> RunError:
        url = self.cfg.where
        return RunError(self.b.scrub(f"cannot reach {url}: {detail}") + f" ({_URL_HINT})")

    async def _work(self, item: tuple[int, GenerationRequest]) -> None:
        index, req = item
        try:
            gens = await self._request(req)
        except _PromptRejected as prompt_rejected:
            # Refused while the endpoint has accepted nothing at all: no way to tell a
            # bad prompt from a request it refuses whatever the prompt.
            raise self._fatal(prompt_rejected.rejected) from None
        self.emit((index, gens))

    # -- one request (n rollouts) ------------------------------------------

    async def _request(self, req: GenerationRequest) -> list[Generation]:
        # What the endpoint accepts (n, seed, max_tokens) is learned at most once each.
        for _ in range(4):
            try:
                if req.n > 1 and self.b.n_supported is False:
                    return await self._one_by_one(req, [])
                gens = await self._call(req.prompt, req.n, req.seed)
                for gen in gens:
                    gen.seed = req.seed
                if len(gens) < req.n:  # n was ignored: fetch the rest one by one
                    return await self._one_by_one(req, gens)
                return gens
            except _Redo:
                continue
            except _PromptRejected as prompt_rejected:
                if not self.b.accepted:
                    raise  # nothing accepted yet: the first request decides (_first)
                return self._rejected_rows(prompt_rejected.rejected, req.seed, req.n)
        raise RunError("the endpoint's answers about n and seed support kept changing")

    def _rejected_rows(self, rejected: Rejected, seed: int | None, n: int) -> list[Generation]:
        """Error rows for a prompt the endpoint refused (the run goes on), unless the
        endpoint has refused so many requests in a row that it refuses everything."""
        if self.rejections.fail():
            raise self._fatal(rejected)
        self.stats.rejected_rollouts += n
        error = self.b.scrub(f"rejected: {rejected.status} {rejected.detail}")
        # The same prompt is refused the same way again: settled, not retried.
        return [Generation(text=None, error=error, seed=seed, settled=True) for _ in range(n)]

    async def _one_by_one(self, req: GenerationRequest, have: list[Generation]) -> list[Generation]:
        """The rest of `req`'s rollouts as n=1 requests, each with its own seed."""

        async def single(k: int) -> Generation:
            seed = (
                req.seed
                if k == 0
                else derive_seed(self.b.base_seed, req.sample_id, req.first_run + k)
            )
            for _ in range(4):
                try:
                    gen = (await self._call(req.prompt, 1, seed))[0]
                except _Redo:
                    continue
                except _PromptRejected as prompt_rejected:
                    if not self.b.accepted:
                        raise
                    gen = self._rejected_rows(prompt_rejected.rejected, seed, 1)[0]
                gen.seed = seed  # its own request's seed, not the first one's
                return gen
            raise RunError("the endpoint's answers about seed support kept changing")

        rest = await asyncio.gather(*(single(k) for k in range(len(have), req.n)))
        return [*have, *rest]

    async def _call(self, prompt: Prompt, n: int, seed: int | None) -> list[Generation]:
        """Up to n generations (fewer only while n support is unknown); error
        generations after the last retry; RunError for a request the endpoint refuses,
        _PromptRejected when that may concern this request alone."""
        sent_seed = seed if self.b.seed_supported is not False else None
        try:
            return await self._attempts(prompt, n, sent_seed)
        except Rejected as rejected:
            if rejected.status not in _CAPABILITY_STATUSES:
                raise self._refusal(rejected) from None
            if (
                self.mode == "chat"
                and not self.b.max_completion_tokens
                and "max_completion_tokens" in rejected.detail
            ):
                self.b.max_completion_tokens = True
                log.warning("the endpoint wants max_completion_tokens instead of max_tokens")
                raise _Redo from None
            return await self._probe(prompt, n, sent_seed, rejected)

    async def _probe(
        self, prompt: Prompt, n: int, seed: int | None, rejected: Rejected
    ) -> list[Generation]:
        """A 400 for a request with n > 1 or a seed: find out whether the endpoint refuses
        one of those (then remember it) or the request itself (see `_refusal`)."""
        variants: list[tuple[int, int | None]] = []
        if seed is not None and self.b.seed_supported is None:
            variants.append((n, None))
        if n > 1 and self.b.n_supported is None:
            variants.append((1, seed))
            if seed is not None and self.b.seed_supported is None:
                variants.append((1, None))
        if not variants:
            raise self._refusal(rejected)
        async with self.probe_lock:
            # Another request may have found out while this one waited.
            if (n > 1 and self.b.n_supported is False) or (
                seed is not None and self.b.seed_supported is False
            ):
                raise _Redo
            for n2, seed2 in variants:
                self.stats.capability_probes += 1
                try:
                    gens = await self._attempts(prompt, n2, seed2)
                except Rejected as again:
                    if again.status not in _CAPABILITY_STATUSES:
                        raise self._refusal(again) from None
                    continue
                if any(g.error is not None for g in gens):
                    return gens  # transient faults to the end: nothing learned
                if seed is not None and seed2 is None:
                    self.b.seed_supported = False
                    log.warning("the endpoint rejects `seed`: sampling without per-rollout seeds")
                if n2 < n:
                    self.b.n_supported = False
                    log.warning("the endpoint rejects n > 1: sending one request per rollout")
                return gens
        raise self._refusal(rejected)

    def _refusal(self, rejected: Rejected) -> Exception:
        """What a refusal that no capability explains means: perhaps this prompt's
        alone (to be decided by the caller), or the run's end."""
        if rejected.status in _PER_REQUEST_STATUSES:
            return _PromptRejected(rejected)
        return self._fatal(rejected)

    def _fatal(self, rejected: Rejected) -> RunError:
        url = self.cfg.where
        status, detail = rejected.status, rejected.detail
        if status == 404:
            msg = f"model '{self.b.model}' not found at {url}: 404"
        elif status == 401:
            msg = f"authentication failed at {url}: 401 (check the key in ${self.b.key_env})"
        elif status == 403:
            msg = f"permission denied at {url}: 403"
        elif status == 429:
            msg = f"out of quota at {url}: 429"
        else:
            msg = f"request rejected by {url}: {status}"
        if detail:
            msg += f" - {detail}"
        return RunError(self.b.scrub(msg))

    # -- one request on the wire -------------------------------------------

    async def _attempts(self, prompt: Prompt, n: int, seed: int | None) -> list[Generation]:
        """Send until a usable answer or the last retry (then error generations);
        raises Rejected on a 4xx."""
        body = self._body(prompt, n, seed)
        estimate = prompt_chars(prompt) / 4 + n * self.sampling.max_tokens

        async def send() -> bytes:
            replica = self.pool.pick()  # the replica with the fewest requests in flight
            fault = True  # a timeout cancels this attempt: the replica's fault
            try:
                raw = await self.endpoints[replica.index].create(**body)
                content = raw.content  # read within the attempt's timeout
                fault = False
                return content
            except Exception as exc:
                fault = replica_fault(exc)
                raise
            finally:
                self.pool.finished(replica, fault=fault, rollouts=0 if fault else n)

        def handle(content: bytes, attempt: Attempt) -> list[Generation]:
            return self._parse(content, n, seed, estimate, attempt)

        try:
            return await self.caller.call(send, handle, cost=estimate)
        except Unreachable as unreachable:
            raise self._unreachable(f"{CONNECTION}: {unreachable.last.message}") from None
        except EndpointDown as down:
            if not self.caller.answered:
                raise self._unreachable(f"{CONNECTION}: {down.last.message}") from None
            url = self.cfg.where
            raise RunError(
                f"lost {url}: {down.failures} attempts in a row failed to connect over "
                f"{down.seconds:.0f} s ({self.b.scrub(down.last.message)}); the finished "
                "rollouts are stored, run the same command again to resume"
            ) from None
        except GaveUp as gave_up:
            self.stats.failed_rollouts += n
            fault, attempts = gave_up.fault, gave_up.attempts
            error = self.b.scrub(f"{fault.cause}: {fault.message}")
            error += f" (gave up after {attempts} attempts)"
            return [Generation(text=None, error=error, attempts=attempts) for _ in range(n)]

    def _parse(
        self, content: bytes, n: int, seed: int | None, estimate: float, attempt: Attempt
    ) -> list[Generation]:
        """A 200's generations; raises Retryable for an unusable body."""
        choices, prompt_tokens, completion_tokens = parse_body(content, self.mode)
        if prompt_tokens is not None and completion_tokens is not None:
            self.caller.pacer.refund(estimate - prompt_tokens - completion_tokens)
        if len(choices) < n:
            if self.b.n_supported is not None or n == 1:
                raise Retryable(MALFORMED, f"response has {len(choices)} of {n} choices")
            # The endpoint answered n > 1 with fewer choices: it ignores n.
            self.b.n_supported = False
            log.warning("the endpoint ignores n > 1: sending one request per rollout")
        else:
            choices = choices[:n]
            if n > 1:
                self.b.n_supported = True
        if seed is not None and self.b.seed_supported is None:
            self.b.seed_supported = True
        self.b.accepted = True
        self.rejections.succeed()
        self.stats.content_filtered += sum(c.finish_reason == CONTENT_FILTER for c in choices)
        return self._generations(
            choices, prompt_tokens, completion_tokens, attempt.latency_s, attempt.number
        )

    def _generations(
        self,
        choices: list[_Choice],
        prompt_tokens: int | None,
        completion_tokens: int | None,
        latency: float,
        attempts: int,
    ) -> list[Generation]:
        k = len(choices)
        # The prompt is billed once per request: share it so the rollouts add up to it.
        prompt_parts: list[int | None] = [None] * k
        if prompt_tokens is not None:
            prompt_parts = [*split_total(prompt_tokens, [1.0] * k)]
        per_choice = [c.completion_tokens for c in choices]
        completion_parts: list[int | None]
        if all(t is not None for t in per_choice):
            completion_parts = list(per_choice)
        elif completion_tokens is not None:
            completion_parts = list(
                completion_token_split(
                    completion_tokens,
                    [c.text for c in choices],
                    [c.finish_reason for c in choices],
                    self.sampling.max_tokens,
                )
            )
        else:
            completion_parts = [None] * k
        return [
            Generation(
                text=c.text,
                finish_reason=c.finish_reason,
                prompt_tokens=p,
                completion_tokens=t,
                latency_s=latency,
                attempts=attempts,
                reasoning=c.reasoning,
                # A server says "not ended" by sending no content; an answer or a
                # normal stop means it ended.
                reasoning_closed=None
                if c.reasoning is None
                else bool(c.text) or c.finish_reason != "length",
            )
            for c, p, t in zip(choices, prompt_parts, completion_parts, strict=True)
        ]

    def _body(self, prompt: Prompt, n: int, seed: int | None) -> dict[str, Any]:
        s = self.sampling
        limit_key = "max_completion_tokens" if self.b.max_completion_tokens else "max_tokens"
        body: dict[str, Any] = {
            "model": self.b.model,
            "temperature": s.temperature,
            "top_p": s.top_p,
            limit_key: s.max_tokens,
        }
        # Only what is needed: n=1 and "no stop" are the defaults everywhere, and some
        # endpoints reject parameters they do not know.
        if n > 1:
            body["n"] = n
        if seed is not None:
            body["seed"] = seed
        if s.stop:
            body["stop"] = list(s.stop)
        if self.mode == "chat":
            body["messages"] = (
                [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
            )
        else:
            body["prompt"] = prompt if isinstance(prompt, str) else _as_text(prompt)
        return body


def _as_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


# --------------------------------------------------------------------------- factory


@contextlib.contextmanager
def open_openai(
    model: str, options: OpenAIOptions | None = None, *, seed: int = 0, **given: Any
) -> Iterator[OpenAIBackend]:
    """Yield a backend for `model` at `options.base_url` (else $OPENAI_BASE_URL, else
    OpenAI's). `given` is the keyword form of `options` (None values: the default).

    The key comes from the environment variable named `options.api_key_env` (default
    OPENAI_API_KEY); without one a placeholder is sent, which local servers accept.
    """
    opts = options or OpenAIOptions.parse({k: v for k, v in given.items() if v is not None})
    key_env = opts.api_key_env
    key = os.environ.get(key_env, "")
    if not key:
        if key_env != DEFAULT_KEY_ENV:
            raise UsageError(f"--api-key-env: the environment variable {key_env} is not set")
        key = PLACEHOLDER_KEY
    urls = opts.urls() or (os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,)
    for url in urls:
        if not urlsplit(url).scheme.startswith("http"):
            raise UsageError(f"--base-url must be an http(s) URL, not {redact_url(url)!r}")
    config = ClientConfig(
        base_url=urls[0],
        base_urls=urls if len(urls) > 1 else (),
        concurrency=opts.concurrency,
        requests_per_minute=opts.requests_per_minute,
        tokens_per_minute=opts.tokens_per_minute,
        timeout=opts.timeout,
        max_retries=opts.max_retries,
        backoff_base=opts.backoff_base,
        backoff_max=opts.backoff_max,
        transport=opts.transport,
    )
    backend = OpenAIBackend(model, config, Secret(key), key_env=key_env, base_seed=seed)
    yield backend
    # After a completed run only: a stopped run ends with its one-line error alone.
    if backend.stats.requests:
        log.info("openai: %s", backend.stats.summary())
        if len(backend.pool) > 1:
            for line in backend.pool.lines():
                log.info("openai: %s", line)
