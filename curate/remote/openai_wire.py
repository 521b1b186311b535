"""The OpenAI-compatible wire format, shared by every client of such an endpoint (the
`openai` backend, the LLM judge): request bodies, response parsing, what an error of
the `openai` SDK means for the remote-call core, and the SDK client itself.

Nothing here retries, paces or decides: that is the remote-call core's
(`curate.remote.caller`) and the caller's. Importing this module imports the
`openai` SDK (the `openai` extra), so `curate.remote` does not import it.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openai  # a missing extra fails here, at backend or grader selection

from curate.core.prompts import Mode, Prompt
from curate.errors import UsageError
from curate.remote.retry import (
    CONNECTION,
    MALFORMED,
    RATE_LIMIT,
    SERVER_ERROR,
    TIMEOUT,
    Rejected,
    Retryable,
    exception_chain,
    is_name_resolution_failure,
    parse_retry_after,
    status_retry_cause,
)
from curate.remote.secrets import Secret
from curate.remote.settings import RemoteSettings

# The finish reason of a completion stopped by the provider's content filter.
CONTENT_FILTER = "content_filter"


# --------------------------------------------------------------------------- faults


def classify(exc: BaseException) -> Exception | None:
    """What an SDK exception means: Retryable, Rejected, or None (not the SDK's)."""
    if isinstance(exc, openai.APIStatusError):
        status, detail = exc.status_code, error_detail(exc)
        if status == 429 and error_code(exc) == "insufficient_quota":
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


def error_detail(exc: openai.APIStatusError) -> str:
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


def error_code(exc: openai.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("code") is not None:
            return str(inner.get("code"))
    return None


# --------------------------------------------------------------------------- requests


def request_body(
    model: str,
    prompt: Prompt,
    mode: Mode,
    *,
    max_tokens: int,
    temperature: float,
    top_p: float | None = None,
    n: int = 1,
    seed: int | None = None,
    stop: Sequence[str] = (),
    max_tokens_key: str = "max_tokens",
    top_logprobs: int | None = None,
    token_ids: bool = False,
) -> dict[str, Any]:
    """The JSON body of a chat or completion request, with only what is needed: n=1,
    no seed and no stop are the defaults everywhere, and some endpoints reject
    parameters they do not know. `max_tokens_key` is "max_completion_tokens" for the
    chat models that refuse `max_tokens`. `top_logprobs`: each generated token's
    log-probability and the top so many at its step; `token_ids`: vLLM's
    `return_token_ids` (each choice's token ids and the prompt's), for exact counts."""
    body: dict[str, Any] = {"model": model, "temperature": temperature}
    if top_p is not None:
        body["top_p"] = top_p
    body[max_tokens_key] = max_tokens
    if n > 1:
        body["n"] = n
    if seed is not None:
        body["seed"] = seed
    if stop:
        body["stop"] = list(stop)
    if top_logprobs is not None:
        if mode == "chat":
            body["logprobs"] = True
            body["top_logprobs"] = top_logprobs
        else:
            body["logprobs"] = top_logprobs
    if token_ids:
        # Not an OpenAI parameter: the SDK sends it only as an extra body field.
        body["extra_body"] = {"return_token_ids": True}
    if mode == "chat":
        body["messages"] = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        )
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else as_text(prompt)
    return body


def as_text(messages: list[dict[str, Any]]) -> str:
    """Chat messages as one completion-mode prompt."""
    return "\n".join(str(m.get("content") or "") for m in messages)


def prompt_chars(prompt: Prompt) -> int:
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(str(m.get("content") or "")) for m in prompt)


# --------------------------------------------------------------------------- responses


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
class Choice:
    """One choice of a response (a completion of the prompt)."""

    index: int
    text: str
    finish_reason: str | None
    completion_tokens: int | None
    reasoning: str | None = None  # the server's reasoning field, when it separated it
    # vLLM's `token_ids` (the choice's generated tokens, with `return_token_ids`) and
    # the prompt's; `knows_token_ids`: the answer had the field at all (a vLLM server,
    # which fills it when asked).
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    knows_token_ids: bool = False
    # With logprobs asked for: each generated token's log-probability and the
    # log-probabilities of the alternatives the server listed at its step.
    token_logprobs: list[float] | None = None
    top_logprobs: list[list[float]] | None = None


# Where OpenAI-compatible servers put separated reasoning: vLLM (0.32) and SGLang
# `reasoning`, DeepSeek's API and older vLLM `reasoning_content`.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _reasoning_of(where: dict[str, Any]) -> str | None:
    for key in REASONING_FIELDS:
        value = where.get(key)
        if isinstance(value, str):
            return value
    return None


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return value
    return None


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise Retryable(MALFORMED, "a log-probability is not a number")


def _logprobs_of(value: Any) -> tuple[list[float] | None, list[list[float]] | None]:
    """(sampled-token log-probabilities, each step's listed log-probabilities) of a
    choice's `logprobs`: the chat form (`content`: [{logprob, top_logprobs: [...]}])
    or the completions form (`token_logprobs`, `top_logprobs`: [{token: logprob}]);
    (None, None) without them."""
    if not isinstance(value, dict):
        return None, None
    content = value.get("content")
    if isinstance(content, list):
        sampled, tops = [], []
        for step in content:
            if not isinstance(step, dict):
                raise Retryable(MALFORMED, "a logprobs entry is not an object")
            sampled.append(_number(step.get("logprob")))
            alts = step.get("top_logprobs") or []
            tops.append([_number(a.get("logprob")) for a in alts if isinstance(a, dict)])
        return sampled, tops
    chosen = value.get("token_logprobs")
    if isinstance(chosen, list):
        listed = value.get("top_logprobs") or [None] * len(chosen)
        return (
            [_number(v) for v in chosen],
            [[_number(v) for v in (a or {}).values()] for a in listed],
        )
    return None, None


def parse_body(content: bytes, mode: Mode) -> tuple[list[Choice], int | None, int | None]:
    """(choices by index, prompt tokens, completion tokens) of a 200 response body;
    raises Retryable(MALFORMED) for a body that is not a usable completion."""
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        raise Retryable(MALFORMED, "response body is not valid JSON") from None
    if not isinstance(data, dict):
        raise Retryable(MALFORMED, "response body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Retryable(MALFORMED, "response has no choices")
    out: list[Choice] = []
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
        sampled, tops = _logprobs_of(c.get("logprobs"))
        out.append(
            Choice(
                index=index if isinstance(index, int) else pos,
                text=text,
                finish_reason=c.get("finish_reason"),
                completion_tokens=tokens,
                reasoning=reasoning,
                token_ids=_ints(c.get("token_ids")),
                prompt_token_ids=_ints(c.get("prompt_token_ids", data.get("prompt_token_ids"))),
                knows_token_ids="token_ids" in c,
                token_logprobs=sampled,
                top_logprobs=tops,
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


# --------------------------------------------------------------------------- clients


def http_client(settings: RemoteSettings) -> Any:
    """The SDK's HTTP client: its aiohttp transport when installed (a quarter less CPU
    per request than httpx, which matters when client and server share the cores)."""
    # The SDK's own Limits class (httpx or httpx2, whichever this SDK version uses).
    from openai._base_client import DEFAULT_CONNECTION_LIMITS

    # The pool must hold every concurrent request, or requests would queue inside the
    # client, where our timeout would count their waiting time.
    size = settings.concurrency + 8
    kwargs: dict[str, Any] = {
        "limits": type(DEFAULT_CONNECTION_LIMITS)(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=30.0
        ),
        "timeout": settings.timeout,
    }
    if settings.transport in ("auto", "aiohttp"):
        try:
            import aiohttp  # noqa: F401  (the SDK's aiohttp transport needs it)

            return openai.DefaultAioHttpClient(**kwargs)
        except (ImportError, RuntimeError):
            if settings.transport == "aiohttp":
                raise UsageError("the aiohttp transport needs `pip install aiohttp`") from None
    return openai.DefaultAsyncHttpxClient(**kwargs)


def async_client(settings: RemoteSettings, url: str, key: Secret) -> openai.AsyncOpenAI:
    """An SDK client for one endpoint that leaves retries to the remote-call core
    (counted, jittered, aware of 429 storms) and times attempts out as `settings` say."""
    return openai.AsyncOpenAI(
        api_key=key.reveal(),
        base_url=url,
        max_retries=0,
        timeout=settings.timeout,
        http_client=http_client(settings),
    )
