"""Any OpenAI-compatible endpoint (a hosted API, `vllm serve`, ...) as a backend.

The backend plans each sample's request for what the endpoint accepts (n > 1, `seed`,
`max_tokens`: learned once by `openai_probe`, then worked around), sends it through
the remote-call core (`curate.remote`: retries with jittered backoff that honour
`Retry-After`, pacing, adaptive concurrency, the outage watch, the background loop
that streams finished requests to the synchronous engine, key scrubbing) in the wire
format of `curate.remote.openai_wire`, and turns the answers into generations.

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
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import openai  # a missing extra fails here, at backend selection

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    Prompt,
    SamplingConfig,
)
from curate.backends.openai_options import OpenAIOptions
from curate.backends.openai_probe import (
    CAPABILITY_STATUSES,
    Capabilities,
    Prober,
    PromptRejected,
    Redo,
    refused_alone,
)
from curate.backends.prefill import PrefillItem, PrefillResult, server_reference_logprobs
from curate.core.reasoning import ended, joined, separated
from curate.core.seeds import derive_seed
from curate.errors import RunError
from curate.remote import (
    CONNECTION,
    Attempt,
    EndpointDown,
    FailureStreak,
    GaveUp,
    Rejected,
    RemoteStats,
    Secret,
    Unreachable,
    redact_url,
    run_pool,
    scrub,
    stream_from_loop,
)
from curate.remote.bridge import Emit
from curate.remote.openai_wire import (
    CONTENT_FILTER,
    Choice,
    async_client,
    classify,
    completion_token_split,
    parse_body,
    prompt_chars,
    replica_fault,
    request_body,
)
from curate.remote.pool import EndpointPool
from curate.remote.settings import OPENAI_KEY_ENV, PLACEHOLDER_KEY, RemoteSettings, shown_urls

__all__ = ["BackendStats", "OpenAIBackend", "open_openai"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# So many requests rejected in a row, with no success between, means the endpoint now
# refuses everything (a model swapped mid-run, say): stop rather than fill the store
# with error rows. Large, so that a run of long prompts in a sorted data set passes.
REJECTION_STREAK = 64
# How to point the backend at a server when the endpoint cannot be reached.
_URL_HINT = (
    "to use a local server, point --base-url (or OPENAI_BASE_URL) at it, "
    "e.g. http://127.0.0.1:8000/v1 for `vllm serve`"
)


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


# --------------------------------------------------------------------------- backend

_Result = tuple[int, list[Generation]]  # (index into the requests, its generations)


class OpenAIBackend:
    """Streams generations from an OpenAI-compatible endpoint; build it with `open_openai`."""

    def __init__(
        self,
        model: str,
        settings: RemoteSettings,
        api_key: Secret,
        *,
        urls: Sequence[str] = (),
        base_seed: int = 0,
    ) -> None:
        """`urls`: the endpoint(s), resolved (empty: `settings.urls()`, else OpenAI's)."""
        self.model = model
        self.settings = settings
        self.urls = tuple(urls) or settings.urls(fallback=DEFAULT_BASE_URL)
        self.key_env = settings.api_key_env or OPENAI_KEY_ENV
        self.base_seed = base_seed
        self.stats = BackendStats()
        # Kept across `stream` calls: a rested replica stays rested between chunks.
        self.pool = EndpointPool(self.urls)
        self._key = api_key
        # What the endpoint accepts, learned from the first request that shows it.
        self.capabilities = Capabilities()
        self.reached = False  # some request got an HTTP answer (any status)
        self._tokenizer: Any = None  # loaded on first need; False: there is none

    @property
    def n_supported(self) -> bool | None:
        return self.capabilities.n_supported

    @n_supported.setter
    def n_supported(self, value: bool | None) -> None:
        self.capabilities.n_supported = value

    @property
    def seed_supported(self) -> bool | None:
        return self.capabilities.seed_supported

    @seed_supported.setter
    def seed_supported(self, value: bool | None) -> None:
        self.capabilities.seed_supported = value

    @property
    def where(self) -> str:
        """The endpoint(s) for messages, without credentials."""
        return shown_urls(self.urls)

    def info(self) -> BackendInfo:
        # A remote endpoint's template is not visible: chat unless told otherwise.
        return BackendInfo(
            model=self.model,
            has_chat_template=True,
            chat_template_sha256=None,
            extra={
                "base_url": redact_url(self.urls[0]),
                **({"base_urls": [redact_url(u) for u in self.urls]} if len(self.pool) > 1 else {}),
                "openai_sdk": openai.__version__,
            },
        )

    def count_tokens(self, text: str) -> int | None:
        """`text`'s length in the model's tokens, when its tokenizer is on this machine
        (a local model directory, or one in the Hugging Face cache); None otherwise."""
        if self._tokenizer is None:
            self._tokenizer = local_tokenizer(self.model) or False
        if self._tokenizer is False:
            return None
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

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

    def reference_logprobs(self, items: Sequence[PrefillItem], mode: Mode) -> list[PrefillResult]:
        """Prefill scoring at the first endpoint (`curate.backends.prefill`), for r3."""
        key = self._key.reveal()
        return server_reference_logprobs(
            self.urls[0],
            None if key == PLACEHOLDER_KEY else key,
            self.model,
            items,
            mode,
            timeout_s=self.settings.timeout,
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
        # One client per replica: the SDK binds a client to one base URL.
        clients = [async_client(self.settings, url, self._key) for url in self.urls]
        try:
            await _Run(self, clients, sampling, mode, emit).execute(requests)
        finally:
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()


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
        self.caps = backend.capabilities
        self.stats = backend.stats
        self.sampling = sampling
        self.mode = mode
        self.emit = emit
        self.caller = backend.settings.caller(
            classify,
            stats=self.stats,
            answered=backend.reached,  # an earlier `stream` call heard from the endpoint
        )
        self.prober = Prober(self.caps, self._count_probe)
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
            if not self.caps.settled:
                # The first request goes alone, so that an endpoint rejecting n > 1 or
                # seed is detected once, not by a burst of rejected requests.
                await self._first(pending)
            # More workers than slots: a worker sleeping before a retry holds no slot,
            # and the others keep the endpoint busy meanwhile.
            await run_pool(pending, 2 * self.b.settings.concurrency, self._work)
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
            except PromptRejected as prompt_rejected:
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
        url = self.b.where
        return RunError(self.b.scrub(f"cannot reach {url}: {detail}") + f" ({_URL_HINT})")

    async def _work(self, item: tuple[int, GenerationRequest]) -> None:
        index, req = item
        try:
            gens = await self._request(req)
        except PromptRejected as prompt_rejected:
            # Refused while the endpoint has accepted nothing at all: no way to tell a
            # bad prompt from a request it refuses whatever the prompt.
            raise self._fatal(prompt_rejected.rejected) from None
        self.emit((index, gens))

    # -- one request (n rollouts) ------------------------------------------

    async def _request(self, req: GenerationRequest) -> list[Generation]:
        # What the endpoint accepts (n, seed, max_tokens) is learned at most once each.
        for _ in range(4):
            try:
                if req.n > 1 and self.caps.n_supported is False:
                    return await self._one_by_one(req, [])
                gens = await self._call(req.prompt, req.n, req.seed)
                for gen in gens:
                    gen.seed = req.seed
                if len(gens) < req.n:  # n was ignored: fetch the rest one by one
                    return await self._one_by_one(req, gens)
                return gens
            except Redo:
                continue
            except PromptRejected as prompt_rejected:
                if not self.caps.accepted:
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
                except Redo:
                    continue
                except PromptRejected as prompt_rejected:
                    if not self.caps.accepted:
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
        PromptRejected when that may concern this request alone."""
        sent_seed = self.caps.seed_to_send(seed)
        try:
            return await self._attempts(prompt, n, sent_seed)
        except Rejected as rejected:
            if rejected.status not in CAPABILITY_STATUSES:
                raise self._refusal(rejected) from None
            if self.caps.learn_limit_key(rejected, self.mode):
                raise Redo from None

            async def variant(n2: int, seed2: int | None) -> list[Generation]:
                return await self._attempts(prompt, n2, seed2)

            return await self.prober.probe(variant, n, sent_seed, rejected, self._refusal)

    def _count_probe(self) -> None:
        self.stats.capability_probes += 1

    def _refusal(self, rejected: Rejected) -> Exception:
        """What a refusal that no capability explains means: perhaps this prompt's
        alone (to be decided by the caller), or the run's end."""
        if refused_alone(rejected):
            return PromptRejected(rejected)
        return self._fatal(rejected)

    def _fatal(self, rejected: Rejected) -> RunError:
        url = self.b.where
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
            url = self.b.where
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
        choices = self.caps.learn_from_answer(choices, n, seed)
        if self.caps.learn_token_ids(choices) and not _counted(choices):
            # The endpoint gives each choice's tokens when asked: ask again, once per
            # backend, rather than store this answer's counts as estimates.
            raise Redo
        self.rejections.succeed()
        self.stats.content_filtered += sum(c.finish_reason == CONTENT_FILTER for c in choices)
        return self._generations(
            choices, prompt_tokens, completion_tokens, attempt.latency_s, attempt.number
        )

    def _generations(
        self,
        choices: list[Choice],
        prompt_tokens: int | None,
        completion_tokens: int | None,
        latency: float,
        attempts: int,
    ) -> list[Generation]:
        """One answer's generations, each with its own token counts and where they came
        from (`_counts`)."""
        gens = []
        for c in choices:
            # A server says "not ended" by sending no content; the rule that decides
            # is curate.core.reasoning's (a block closed at the last token included).
            closed = None if c.reasoning is None else ended(c.text, c.finish_reason)
            gens.append(
                Generation(
                    text=c.text,
                    finish_reason=c.finish_reason,
                    latency_s=latency,
                    attempts=attempts,
                    reasoning=c.reasoning,
                    reasoning_closed=closed,
                    token_logprobs=c.token_logprobs,
                    top_logprobs=_top_k(c.top_logprobs, self.sampling.logprobs),
                )
            )
        self._counts(gens, choices, prompt_tokens, completion_tokens)
        return gens

    def _counts(
        self,
        gens: list[Generation],
        choices: list[Choice],
        prompt_tokens: int | None,
        completion_tokens: int | None,
    ) -> None:
        """Each generation's prompt and completion tokens, exact when the answer says
        them per choice (vLLM's `token_ids`, the log-probabilities, a per-choice usage,
        or a request's usage with one choice), else counted with the model's tokenizer
        when there is one, else the request's total shared out (estimated).

        The prompt is each rollout's own: the request's prompt tokens (reported once
        per request, as the prompt was sent once), as the offline engine stores it."""
        estimated: list[int] | None = None
        for pos, (gen, c) in enumerate(zip(gens, choices, strict=True)):
            gen.prompt_tokens = (
                len(c.prompt_token_ids) if c.prompt_token_ids is not None else prompt_tokens
            )
            source = "exact"
            if c.token_ids is not None:
                gen.completion_tokens = len(c.token_ids)
            elif c.token_logprobs is not None:
                gen.completion_tokens = len(c.token_logprobs)
            elif c.completion_tokens is not None:
                gen.completion_tokens = c.completion_tokens
            elif len(choices) == 1 and completion_tokens is not None:
                gen.completion_tokens = completion_tokens
            elif (counted := self.b.count_tokens(_as_generated(c))) is not None:
                gen.completion_tokens, source = counted, "tokenizer"
            elif completion_tokens is not None:
                if estimated is None:
                    estimated = completion_token_split(
                        completion_tokens,
                        [_as_generated(ch) for ch in choices],
                        [ch.finish_reason for ch in choices],
                        self.sampling.max_tokens,
                    )
                gen.completion_tokens, source = estimated[pos], "estimated"
            else:
                source = ""
            if gen.completion_tokens is not None or gen.prompt_tokens is not None:
                gen.token_count_source = source or "estimated"

    def _body(self, prompt: Prompt, n: int, seed: int | None) -> dict[str, Any]:
        s = self.sampling
        return request_body(
            self.b.model,
            prompt,
            self.mode,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            n=n,
            seed=seed,
            stop=s.stop,
            max_tokens_key=self.caps.max_tokens_key,
            # One more than K: vLLM lists the sampled token first among them, so K + 1
            # always holds the true top K (see `_top_k`).
            top_logprobs=None if s.logprobs is None else s.logprobs + 1,
            token_ids=self.caps.token_ids is True,
        )


def local_tokenizer(model: str) -> Any:
    """The tokenizer of `model` if it can be loaded without the network, else None."""
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model, local_files_only=True)
    except Exception:  # no transformers, not a local model, not cached: no tokenizer
        return None


def _counted(choices: list[Choice]) -> bool:
    """Whether an answer says every choice's completion tokens by itself."""
    return len(choices) == 1 or all(
        c.token_ids is not None or c.token_logprobs is not None or c.completion_tokens is not None
        for c in choices
    )


def _as_generated(choice: Choice) -> str:
    """A choice's text as the model generated it: its reasoning put back in its tags."""
    if choice.reasoning is None:
        return choice.text
    split = separated(choice.text, choice.reasoning, ended(choice.text, choice.finish_reason))
    return joined(split)


def _top_k(steps: list[list[float]] | None, k: int | None) -> list[list[float]] | None:
    """The K largest of each step's listed log-probabilities. The backend asks for K + 1:
    vLLM lists the sampled token first and then the top ones, so K + 1 entries hold the
    true top K whether or not the sampled token is among them."""
    if steps is None or not k:
        return None
    return [sorted(step, reverse=True)[:k] for step in steps]


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
    key = opts.remote.sdk_key()
    urls = opts.remote.urls(fallback=DEFAULT_BASE_URL)
    backend = OpenAIBackend(model, opts.remote, key, urls=urls, base_seed=seed)
    yield backend
    # After a completed run only: a stopped run ends with its one-line error alone.
    if backend.stats.requests:
        log.info("openai: %s", backend.stats.summary())
        if len(backend.pool) > 1:
            for line in backend.pool.lines():
                log.info("openai: %s", line)
