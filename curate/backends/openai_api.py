"""Any OpenAI-compatible endpoint (a hosted API, `vllm serve`, ...) through the `openai` SDK.

Requests run concurrently on an asyncio loop in a background thread; each finished
request is handed to the synchronous engine through a queue, so its rollouts reach
disk while the others are still in flight. The SDK's own retries are off: this module
retries 429s, 5xx, timeouts, dropped connections and malformed bodies itself (jittered
exponential backoff, `Retry-After` honoured), counts every retry by cause in
`backend.stats`, and halves its concurrency on repeated 429s (then grows it back).
A 4xx other than 429 stops the run with one line, once it is clear that the endpoint
does not merely refuse n > 1, `seed` or `max_tokens` (learned once, then worked around).
The API key is read from the environment and scrubbed from every message this module
produces.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import math
import os
import queue
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
from curate.errors import CurateError, RunError, UsageError

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (vllm serve without --api-key) want some key; the SDK refuses none.
PLACEHOLDER_KEY = "EMPTY"
# Rejections that may only mean "this endpoint does not take n > 1 or seed".
_CAPABILITY_STATUSES = (400, 422)
# Fault causes, as counted in `BackendStats.retries`.
CAUSES = ("rate_limit", "server_error", "timeout", "connection", "malformed")


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to talk to the endpoint. Holds no secret (the key is kept apart)."""

    base_url: str = DEFAULT_BASE_URL
    concurrency: int = 32
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    timeout: float = 120.0  # seconds per attempt, from sending to the whole body
    max_retries: int = 8
    backoff_base: float = 0.5  # first retry waits about this long, then doubling
    backoff_max: float = 30.0
    retry_after_max: float = 120.0  # a server asking for longer is not waited on past this
    transport: str = "auto"  # "aiohttp", "httpx", or auto: aiohttp when installed

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
class BackendStats:
    """Run-level counters (all requests of every `stream` call of one backend)."""

    requests: int = 0  # HTTP attempts sent, retries and capability probes included
    retries: Counter[str] = field(default_factory=Counter)  # cause -> retries
    failed_rollouts: int = 0  # rollouts stored as errors after their last retry
    capability_probes: int = 0  # extra requests made to learn about n / seed support
    concurrency_cuts: int = 0
    lowest_concurrency: int | None = None
    rate_limit_wait_s: float = 0.0

    @property
    def total_retries(self) -> int:
        return sum(self.retries.values())

    def summary(self) -> str:
        causes = ", ".join(f"{c} {self.retries[c]}" for c in CAUSES if self.retries[c])
        line = f"{self.requests} requests, {self.total_retries} retries"
        if causes:
            line += f" ({causes})"
        if self.failed_rollouts:
            line += f", {self.failed_rollouts} rollouts failed after retries"
        if self.concurrency_cuts:
            line += (
                f", concurrency cut {self.concurrency_cuts}x on 429s "
                f"(lowest {self.lowest_concurrency})"
            )
        return line


# --------------------------------------------------------------------------- secrets


class _Secret:
    """Wraps the key so that no repr, traceback local or f-string shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


# Bearer tokens and OpenAI-style keys (servers sometimes echo part of a bad key).
_KEYLIKE = re.compile(r"(?i)(bearer\s+)\S+|\bsk-[A-Za-z0-9_*\-.]{4,}")


def scrub(text: str, secret: _Secret | str | None = None) -> str:
    """`text` on one line, at most 300 characters, without the key or anything key-like."""
    value = secret.reveal() if isinstance(secret, _Secret) else secret
    if value and value != PLACEHOLDER_KEY and len(value) >= 4:
        text = text.replace(value, "***")
    text = _KEYLIKE.sub(lambda m: (m.group(1) or "") + "***", text)
    first = " ".join(text.split())
    return first[:300]


def redact_url(url: str) -> str:
    """The URL without user info or query (either could carry a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


# --------------------------------------------------------------------------- pacing


class TokenBucket:
    """Refills `per_minute / 60` units a second up to one second's worth; may go into
    debt so that a request costing more than the capacity still passes (then waits)."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()  # FIFO: waiters are served in arrival order

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    async def take(self, amount: float) -> float:
        """Spend `amount`, waiting until the bucket holds min(amount, capacity); returns
        the seconds waited."""
        async with self._lock:
            self._refill()
            need = min(amount, self.capacity)
            waited = 0.0
            if self.level < need:
                waited = (need - self.level) / self.rate
                await asyncio.sleep(waited)
                self._refill()
            self.level -= amount
            return waited

    def refund(self, amount: float) -> None:
        """Give back what a request did not use (its estimate was an upper bound)."""
        if amount > 0:
            self._refill()
            self.level = min(self.capacity, self.level + amount)


class AdaptiveConcurrency:
    """A concurrency limit that halves on a 429 and grows back by one per window.

    Only a 429 for a request sent after the last cut cuts again: a burst of 429s from
    requests that were already in flight is one congestion signal, not many.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.active = 0
        self.cuts = 0
        self.lowest = maximum
        self._last_cut = -math.inf
        self._cond = asyncio.Condition()

    @property
    def current(self) -> int:
        return max(1, int(self.limit))

    async def acquire(self) -> float:
        """Take a slot; returns the monotonic send time (for `on_rate_limited`)."""
        async with self._cond:
            await self._cond.wait_for(lambda: self.active < self.current)
            self.active += 1
        return time.monotonic()

    async def release(self) -> None:
        async with self._cond:
            self.active -= 1
            self._cond.notify(max(1, self.current - self.active))

    def on_success(self) -> None:
        # Additive increase: about +1 per `limit / 2` successes (TCP-like, a bit quicker).
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 2.0 / self.limit)

    def on_rate_limited(self, sent_at: float) -> bool:
        """Halve the limit unless this request predates the last cut; True if cut."""
        if sent_at < self._last_cut:
            return False
        self.limit = max(1.0, self.limit / 2)
        self._last_cut = time.monotonic()
        self.cuts += 1
        self.lowest = min(self.lowest, self.current)
        return True


# --------------------------------------------------------------------------- faults


class _Retryable(Exception):
    """A transient fault: try again after a pause."""

    def __init__(self, cause: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message
        self.retry_after = retry_after


class _Rejected(Exception):
    """A 4xx that retrying cannot fix."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class _Redo(Exception):
    """The endpoint's capabilities were learned meanwhile: plan the request again."""


def parse_retry_after(headers: Any) -> float | None:
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
    return max(0.0, when.timestamp() - time.time())


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


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first (a few levels at most)."""
    chain = [exc]
    while len(chain) < 8:
        nxt = chain[-1].__cause__ or chain[-1].__context__
        if nxt is None or nxt in chain:
            break
        chain.append(nxt)
    return chain


def _error_code(exc: openai.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code") is not None:
            return str(inner.get("code"))
    return None


def _fault(exc: BaseException) -> Exception:
    """Map an SDK exception to _Retryable or _Rejected (or return it as it is)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _error_detail(exc)
        if status == 429:
            if _error_code(exc) == "insufficient_quota":  # waiting will not add credit
                return _Rejected(status, detail)
            wait = parse_retry_after(exc.response.headers)
            return _Retryable("rate_limit", f"429 {detail}", wait)
        if status >= 500 or status in (408, 409):
            return _Retryable("server_error", f"{status} {detail}")
        return _Rejected(status, detail)
    if isinstance(exc, openai.APIConnectionError | TimeoutError):
        chain = _causes(exc)
        # The SDK's aiohttp transport reports a dropped or refused connection as a
        # connect *timeout*: look at what aiohttp itself raised.
        dropped = any(
            type(e).__module__.startswith("aiohttp") and not isinstance(e, TimeoutError)
            for e in chain
        )
        if dropped or not isinstance(exc, openai.APITimeoutError | TimeoutError):
            root = chain[-1]
            detail = f"{type(root).__name__}: {root}" if root is not exc else str(exc)
            return _Retryable("connection", f"connection error ({detail})")
        return _Retryable("timeout", "request timed out")
    if isinstance(exc, openai.APIResponseValidationError):
        return _Retryable("malformed", "malformed response")
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))


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


def parse_body(content: bytes, mode: Mode) -> tuple[list[_Choice], int | None, int | None]:
    """(choices by index, prompt tokens, completion tokens) of a 200 response body;
    raises _Retryable("malformed") for a body that is not a usable completion."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        raise _Retryable("malformed", "response body is not valid JSON") from None
    if not isinstance(data, dict):
        raise _Retryable("malformed", "response body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Retryable("malformed", "response has no choices")
    out: list[_Choice] = []
    for pos, c in enumerate(choices):
        if not isinstance(c, dict):
            raise _Retryable("malformed", "response choice is not an object")
        if mode == "chat":
            message = c.get("message")
            if not isinstance(message, dict):
                raise _Retryable("malformed", "response choice has no message")
            text = message.get("content")
            text = "" if text is None else text  # e.g. a refusal: an (empty) answer
        else:
            text = c.get("text")
        if not isinstance(text, str):
            raise _Retryable("malformed", "response choice has no text")
        usage = c.get("usage")
        tokens = _int_or_none(usage.get("completion_tokens")) if isinstance(usage, dict) else None
        index = c.get("index")
        out.append(
            _Choice(
                index=index if isinstance(index, int) else pos,
                text=text,
                finish_reason=c.get("finish_reason"),
                completion_tokens=tokens,
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


@dataclass
class _Call:
    """One `stream` call: what it asks for, the queue its results go to, and how the
    consumer reaches its loop (to cancel it)."""

    requests: list[GenerationRequest]
    sampling: SamplingConfig
    mode: Mode
    results: queue.Queue[tuple[str, Any]] = field(default_factory=queue.Queue)
    started: threading.Event = field(default_factory=threading.Event)
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None


class OpenAIBackend:
    """Streams generations from an OpenAI-compatible endpoint; build it with `open_openai`."""

    def __init__(
        self,
        model: str,
        config: ClientConfig,
        api_key: _Secret,
        *,
        key_env: str = DEFAULT_KEY_ENV,
        base_seed: int = 0,
    ) -> None:
        self.model = model
        self.config = config
        self.key_env = key_env
        self.base_seed = base_seed
        self.stats = BackendStats()
        self._key = api_key
        # What the endpoint accepts, learned from the first request that shows it
        # (None: not known yet). Kept across `stream` calls.
        self.n_supported: bool | None = None
        self.seed_supported: bool | None = None
        self.reached = False  # some request got an HTTP answer (any status)
        # Newer chat models refuse `max_tokens` and want `max_completion_tokens`.
        self.max_completion_tokens = False

    def info(self) -> BackendInfo:
        # A remote endpoint's template is not visible: chat unless told otherwise.
        return BackendInfo(
            model=self.model,
            has_chat_template=True,
            chat_template_sha256=None,
            extra={"base_url": redact_url(self.config.base_url), "openai_sdk": openai.__version__},
        )

    def scrub(self, text: str) -> str:
        return scrub(text, self._key)

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
    ) -> Iterator[tuple[int, list[Generation]] | None]:
        """Yield (index, generations) as requests finish, None while waiting; stops the
        loop if abandoned."""
        if not requests:
            return
        call = _Call(list(requests), sampling, mode)
        thread = threading.Thread(
            target=self._thread_main, args=(call,), name="curate-openai", daemon=True
        )
        thread.start()
        try:
            while True:
                try:
                    # A timeout keeps Ctrl-C responsive in the consuming thread.
                    kind, payload = call.results.get(timeout=0.5)
                except queue.Empty:
                    if not thread.is_alive() and call.results.empty():
                        raise RunError("the openai backend's worker thread stopped") from None
                    yield None  # a heartbeat: lets the engine flush what it holds
                    continue
                if kind == "result":
                    yield payload
                elif kind == "error":
                    raise payload
                else:
                    return
        finally:
            self._stop(call, thread)

    @staticmethod
    def _stop(call: _Call, thread: threading.Thread) -> None:
        if thread.is_alive() and call.started.wait(timeout=5):
            loop, task = call.loop, call.task
            if loop is not None and task is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=30)

    def _thread_main(self, call: _Call) -> None:
        try:
            asyncio.run(self._main(call))
            call.results.put(("done", None))
        except CurateError as exc:
            call.results.put(("error", exc))
        except asyncio.CancelledError:
            call.results.put(("error", RunError("generation was cancelled")))
        except BaseException as exc:  # anything else: one scrubbed line, never the key
            first = self.scrub(str(exc) or type(exc).__name__)
            error = RunError(f"openai backend failed: {type(exc).__name__}: {first}")
            call.results.put(("error", error))
        finally:
            call.started.set()

    async def _main(self, call: _Call) -> None:
        call.loop = asyncio.get_running_loop()
        call.task = asyncio.current_task()
        call.started.set()
        cfg = self.config
        pool = _http_client(cfg)
        client = openai.AsyncOpenAI(
            api_key=self._key.reveal(),
            base_url=cfg.base_url,
            max_retries=0,  # ours, below: counted, jittered, and aware of 429 storms
            timeout=cfg.timeout,
            http_client=pool,
        )
        try:
            await _Run(self, client, call).execute(call.requests)
        finally:
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
    """One `stream` call on the background loop: workers, pacing, retries."""

    def __init__(self, backend: OpenAIBackend, client: openai.AsyncOpenAI, call: _Call) -> None:
        self.b = backend
        self.cfg = backend.config
        self.stats = backend.stats
        self.sampling = call.sampling
        self.mode = call.mode
        self.results = call.results
        self.limiter = AdaptiveConcurrency(self.cfg.concurrency)
        rpm, tpm = self.cfg.requests_per_minute, self.cfg.tokens_per_minute
        self.rpm = TokenBucket(rpm) if rpm else None
        self.tpm = TokenBucket(tpm) if tpm else None
        self.probe_lock = asyncio.Lock()
        self.rng = random.Random()
        self.endpoint = (
            client.chat.completions.with_raw_response
            if self.mode == "chat"
            else client.completions.with_raw_response
        )

    async def execute(self, requests: list[GenerationRequest]) -> None:
        pending = list(enumerate(requests))
        pending.reverse()  # pop() from the end keeps request order
        unknown = self.b.n_supported is None or self.b.seed_supported is None
        if unknown:
            # The first request goes alone, so that an endpoint rejecting n > 1 or seed
            # is detected once, not by a burst of rejected requests.
            index, req = pending.pop()
            gens = await self._request(req)
            refused = all((g.error or "").startswith("connection") for g in gens)
            if refused and not self.b.reached:
                # Nothing ever answered: a wrong URL or a server that is down. Stop,
                # rather than turn the whole data set into error rows.
                url = redact_url(self.cfg.base_url)
                raise RunError(self.b.scrub(f"cannot reach {url}: {gens[0].error}"))
            self._emit(index, gens)

        async def worker() -> None:
            while pending:
                index, req = pending.pop()
                self._emit(index, await self._request(req))

        # More workers than slots: a worker sleeping before a retry holds no slot, and
        # the others keep the endpoint busy meanwhile.
        workers = min(len(pending), 2 * self.cfg.concurrency)
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(workers):
                    group.create_task(worker())
        except BaseExceptionGroup as group_error:
            raise _first_leaf(group_error) from None
        if self.limiter.cuts:
            self.stats.concurrency_cuts += self.limiter.cuts
            low = self.limiter.lowest
            prev = self.stats.lowest_concurrency
            self.stats.lowest_concurrency = low if prev is None else min(prev, low)

    def _emit(self, index: int, gens: list[Generation]) -> None:
        self.results.put(("result", (index, gens)))

    # -- one request (n rollouts) ------------------------------------------

    async def _request(self, req: GenerationRequest) -> list[Generation]:
        # What the endpoint accepts (n, seed, max_tokens) is learned at most once each.
        for _ in range(4):
            try:
                if req.n > 1 and self.b.n_supported is False:
                    return await self._one_by_one(req, [])
                gens = await self._call(req.prompt, req.n, req.seed)
                if len(gens) < req.n:  # n was ignored: fetch the rest one by one
                    return await self._one_by_one(req, gens)
                return gens
            except _Redo:
                continue
        raise RunError("the endpoint's answers about n and seed support kept changing")

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
                    return (await self._call(req.prompt, 1, seed))[0]
                except _Redo:
                    continue
            raise RunError("the endpoint's answers about seed support kept changing")

        rest = await asyncio.gather(*(single(k) for k in range(len(have), req.n)))
        return [*have, *rest]

    async def _call(self, prompt: Prompt, n: int, seed: int | None) -> list[Generation]:
        """Up to n generations (fewer only while n support is unknown); error
        generations after the last retry; RunError for a request the endpoint refuses."""
        sent_seed = seed if self.b.seed_supported is not False else None
        try:
            return await self._attempts(prompt, n, sent_seed)
        except _Rejected as rejected:
            if rejected.status not in _CAPABILITY_STATUSES:
                raise self._fatal(rejected) from None
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
        self, prompt: Prompt, n: int, seed: int | None, rejected: _Rejected
    ) -> list[Generation]:
        """A 400 for a request with n > 1 or a seed: find out whether the endpoint refuses
        one of those (then remember it) or the request itself (then stop the run)."""
        variants: list[tuple[int, int | None]] = []
        if seed is not None and self.b.seed_supported is None:
            variants.append((n, None))
        if n > 1 and self.b.n_supported is None:
            variants.append((1, seed))
            if seed is not None and self.b.seed_supported is None:
                variants.append((1, None))
        if not variants:
            raise self._fatal(rejected)
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
                except _Rejected as again:
                    if again.status not in _CAPABILITY_STATUSES:
                        raise self._fatal(again) from None
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
        raise self._fatal(rejected)

    def _fatal(self, rejected: _Rejected) -> RunError:
        url = redact_url(self.cfg.base_url)
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

    async def _attempts(self, prompt: Prompt, n: int, seed: int | None) -> list[Generation]:
        """Send until a usable answer or the last retry; raises _Rejected on a 4xx."""
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._once(prompt, n, seed, attempts)
            except _Retryable as fault:
                if attempts > self.cfg.max_retries:
                    self.stats.failed_rollouts += n
                    error = self.b.scrub(f"{fault.cause}: {fault.message}")
                    error += f" (gave up after {attempts} attempts)"
                    return [Generation(text=None, error=error, attempts=attempts) for _ in range(n)]
                self.stats.retries[fault.cause] += 1
                await asyncio.sleep(self._delay(fault, attempts))

    def _delay(self, fault: _Retryable, attempt: int) -> float:
        if fault.retry_after is not None:
            wait = min(fault.retry_after, self.cfg.retry_after_max)
            # A little jitter so that clients told the same time do not return together.
            return wait + self.rng.uniform(0, 0.1 * max(wait, self.cfg.backoff_base))
        cap = min(self.cfg.backoff_max, self.cfg.backoff_base * 2 ** (attempt - 1))
        return self.rng.uniform(cap / 2, cap)

    async def _once(
        self, prompt: Prompt, n: int, seed: int | None, attempts: int
    ) -> list[Generation]:
        """One HTTP attempt, parsed; raises _Retryable or _Rejected."""
        kwargs = self._body(prompt, n, seed)
        estimate = prompt_chars(prompt) / 4 + n * self.sampling.max_tokens
        await self.limiter.acquire()
        try:
            if self.rpm is not None:
                self.stats.rate_limit_wait_s += await self.rpm.take(1)
            if self.tpm is not None:
                self.stats.rate_limit_wait_s += await self.tpm.take(estimate)
            sent_at = time.monotonic()
            started = time.perf_counter()
            self.stats.requests += 1
            try:
                async with asyncio.timeout(self.cfg.timeout):
                    raw = await self.endpoint.create(**kwargs)
                    content = raw.content
            except Exception as exc:
                fault = _fault(exc)
                if isinstance(exc, openai.APIStatusError):
                    self.b.reached = True
                if isinstance(fault, _Retryable) and fault.cause == "rate_limit":
                    self.limiter.on_rate_limited(sent_at)
                raise fault from None
            latency = time.perf_counter() - started
            self.b.reached = True
        finally:
            await self.limiter.release()
        choices, prompt_tokens, completion_tokens = parse_body(content, self.mode)
        if self.tpm is not None and prompt_tokens is not None and completion_tokens is not None:
            self.tpm.refund(estimate - prompt_tokens - completion_tokens)
        if len(choices) < n:
            if self.b.n_supported is not None or n == 1:
                raise _Retryable("malformed", f"response has {len(choices)} of {n} choices")
            # The endpoint answered n > 1 with fewer choices: it ignores n.
            self.b.n_supported = False
            log.warning("the endpoint ignores n > 1: sending one request per rollout")
        else:
            choices = choices[:n]
            if n > 1:
                self.b.n_supported = True
        if seed is not None and self.b.seed_supported is None:
            self.b.seed_supported = True
        self.limiter.on_success()
        return self._generations(choices, prompt_tokens, completion_tokens, latency, attempts)

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


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first real error in a task group's failure (RunError before the rest)."""
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
    return leaves[0] if leaves else RunError("generation failed")


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
    url = opts.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    if not urlsplit(url).scheme.startswith("http"):
        raise UsageError(f"--base-url must be an http(s) URL, not {redact_url(url)!r}")
    config = ClientConfig(
        base_url=url,
        concurrency=opts.concurrency,
        requests_per_minute=opts.requests_per_minute,
        tokens_per_minute=opts.tokens_per_minute,
        timeout=opts.timeout,
        max_retries=opts.max_retries,
        backoff_base=opts.backoff_base,
        backoff_max=opts.backoff_max,
        transport=opts.transport,
    )
    backend = OpenAIBackend(model, config, _Secret(key), key_env=key_env, base_seed=seed)
    yield backend
    # After a completed run only: a stopped run ends with its one-line error alone.
    if backend.stats.requests:
        log.info("openai: %s", backend.stats.summary())
