"""`--grader reward-model`: a sequence-classification reward model behind an HTTP server
(vLLM's `/classify`, `/pooling` or `/score`), scoring each rollout with a continuous value.

What the reward model reads: the prompt as the policy saw it plus the completion. A chat
prompt is sent as its messages followed by an assistant message holding the completion,
and the server renders them with the reward model's own chat template (as reward models
are trained); a completion-mode prompt is sent as the text prompt + completion.

The server's raw output is asked for (`use_activation: false`): one logit for a one-label
model, one per label for a classifier. The raw value (the logit, or a two-label model's
log-odds of the "right" label) is kept in `raw_score`; the score is its sigmoid (for two
labels: the softmax probability of the "right" label), or, with `--score-range LO:HI`, the
raw value mapped linearly from that range.

Requests go through the remote-call core (`curate.remote`): retries with backoff that
honour `Retry-After`, adaptive concurrency, the outage watch and key scrubbing. A request
that still fails, or an answer that cannot be read, is that rollout's error row, never a
score of 0. The endpoint is found once, when the grader is built, by sending one probe to
each candidate in turn (or taken from `--reward-endpoint`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import httpx  # the openai extra brings it; a missing one fails at grader selection

from curate.core.options import OptionSchema, option
from curate.errors import RunError, UsageError
from curate.graders.base import (
    GradeResult,
    GraderOptions,
    GradingError,
    SampleContext,
    ScoreRange,
    check_lengths,
    error_result,
    scored,
)
from curate.remote import (
    CONNECTION,
    MALFORMED,
    RATE_LIMIT,
    TIMEOUT,
    Attempt,
    EndpointDown,
    GaveUp,
    Rejected,
    RemoteCaller,
    RemoteStats,
    Retryable,
    Secret,
    Unreachable,
    is_name_resolution_failure,
    parse_retry_after,
    redact_url,
    run_pool,
    scrub,
    status_retry_cause,
    stream_from_loop,
)
from curate.remote.settings import REWARD_MODEL, RemoteSettings

ENDPOINTS: Final = ("classify", "pooling", "score")
# Auto-detection tries them in this order: `/classify` answers with every label's value,
# `/pooling` is the generic route, `/score` takes text pairs only.
AUTO: Final = "auto"
# Statuses that say "this server has no such route / task" during detection.
_MISSING_ROUTE = (404, 405, 501)
PROBE_PROMPT: Final = "What is 1 + 1?"
PROBE_COMPLETION: Final = "2"
LABEL = "reward model"


@dataclass(frozen=True)
class RewardModelConfig(OptionSchema):
    """Where the reward model is served and how to call it: the `reward-model` kind's
    option schema (`--reward-*` flags, or `-O reward-model.NAME=VALUE`). Holds no
    secret: the key is read from the environment variable `api_key_env` names."""

    label: ClassVar[str] = "--grader reward-model"
    flag_prefix: ClassVar[str] = "--reward-"

    base_url: str = option(help="the reward model's server, e.g. http://127.0.0.1:8001")
    model: str | None = option(
        None, "the served model's name", default_help="the server's only model"
    )
    # How to reach the server: defaults and checks are the reward model's remote
    # settings' (no key unless a variable is named).
    api_key_env: str | None = option(
        REWARD_MODEL.api_key_env, "the environment variable holding the server's API key"
    )
    endpoint: str = option(AUTO, "the endpoint to call: auto, classify, pooling or score")
    concurrency: int = option(
        REWARD_MODEL.concurrency,
        "requests in flight at once",
        min=RemoteSettings.bound("concurrency"),
    )
    timeout: float = option(
        REWARD_MODEL.timeout, "seconds per request", min=RemoteSettings.bound("timeout")
    )
    max_retries: int = option(
        REWARD_MODEL.max_retries,
        "retries of a failed request",
        min=RemoteSettings.bound("max_retries"),
    )
    # The settings the requests run with, built (and validated) from the above.
    remote: RemoteSettings = field(default=REWARD_MODEL, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise UsageError(
                f"--reward-base-url {redact_url(self.base_url)!r}: expected an http:// or "
                "https:// URL, e.g. http://127.0.0.1:8001"
            )
        if self.endpoint not in (AUTO, *ENDPOINTS):
            raise UsageError(
                f"--reward-endpoint {self.endpoint!r}: expected one of auto, "
                + ", ".join(ENDPOINTS)
            )
        remote = dataclasses.replace(
            REWARD_MODEL,
            base_urls=(self.base_url,),
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        object.__setattr__(self, "remote", remote)
        super().__post_init__()

    @property
    def root(self) -> str:
        """The server's root URL: vLLM serves /classify and /pooling there, not under /v1."""
        url = self.remote.urls()[0].rstrip("/")
        return url.removesuffix("/v1")

    def secret(self) -> Secret | None:
        """The API key from the environment, or None when no variable is named."""
        return self.remote.api_key(
            missing="{flag} {name}: the variable is not set or empty", may_be_unset=None
        )


# --------------------------------------------------------------------------- values


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x), without overflow for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def reward_of(values: Sequence[float]) -> float:
    """The raw reward from a classifier's outputs: the logit of a one-label model, or a
    two-label model's log-odds of label 1 ("right") over label 0 (so that its sigmoid is
    the softmax probability of label 1)."""
    if len(values) == 1:
        return values[0]
    if len(values) == 2:
        return values[1] - values[0]
    raise GradingError(
        f"{LABEL} returned {len(values)} values; expected 1 (a reward logit) or 2 (wrong, right)"
    )


def score_reward(raw: float, score_range: ScoreRange | None) -> GradeResult:
    """The grade for a raw reward: its sigmoid, or mapped from `score_range` (a value
    outside the declared range is an error row, as for every ranged grader)."""
    if not math.isfinite(raw):
        raise GradingError(f"{LABEL} returned {raw!r}")
    if score_range is None:
        return GradeResult(score=min(1.0, max(0.0, sigmoid(raw))), extracted=None, raw_score=raw)
    return scored(raw, LABEL, score_range)


def _floats(value: object) -> list[float]:
    """A number or a flat list of numbers as floats; GradingError otherwise."""
    items = value if isinstance(value, list) else [value]
    out: list[float] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise GradingError(f"{LABEL} answered {type(item).__name__} where a number belongs")
        out.append(float(item))
    if not out:
        raise GradingError(f"{LABEL} answered an empty list")
    return out


def parse_answer(endpoint: str, body: object) -> list[float]:
    """The raw outputs (one per label) from a server's JSON answer to one input."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list) or not body["data"]:
        raise GradingError(f"{LABEL}: no 'data' in the /{endpoint} answer")
    item = body["data"][0]
    if not isinstance(item, dict):
        raise GradingError(f"{LABEL}: malformed /{endpoint} answer")
    key = {"classify": "probs", "pooling": "data", "score": "score"}[endpoint]
    if key not in item:
        raise GradingError(f"{LABEL}: no {key!r} in the /{endpoint} answer")
    return _floats(item[key])


# --------------------------------------------------------------------------- requests


def request_body(
    endpoint: str, prompt: object, completion: str, model: str | None
) -> dict[str, Any]:
    """The JSON body asking `endpoint` for the raw reward of `completion` to `prompt`."""
    body: dict[str, Any] = {"use_activation": False}
    if model is not None:
        body["model"] = model
    if endpoint == "score":
        if not isinstance(prompt, str):
            raise GradingError(
                "the /score endpoint takes text pairs, not chat messages: serve the reward "
                "model with /classify or /pooling, or evaluate in --mode completion"
            )
        return {**body, "queries": prompt, "documents": completion}
    if endpoint == "pooling":
        body["task"] = "classify"
    if isinstance(prompt, str):
        return {**body, "input": prompt + completion}
    if isinstance(prompt, list):
        messages = [dict(m) for m in prompt] + [{"role": "assistant", "content": completion}]
        return {**body, "messages": messages}
    raise GradingError(f"cannot send a prompt of type {type(prompt).__name__} to the {LABEL}")


def _server_detail(status: int, text: str) -> str:
    """The server's own message for a failed request (vLLM: {"error": {"message"}})."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip() or f"HTTP {status}"
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if body.get("detail"):
            return str(body["detail"])
        if body.get("message"):
            return str(body["message"])
    return text.strip() or f"HTTP {status}"


class _Status(Exception):
    """A non-2xx answer, read in full."""

    def __init__(self, status: int, text: str, headers: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.text = text
        self.headers = headers


def classify_fault(exc: BaseException) -> Exception | None:
    """What an exception of a reward-model request means for the remote-call core."""
    if isinstance(exc, _Status):
        detail = f"{exc.status} {_server_detail(exc.status, exc.text)}"
        cause = status_retry_cause(exc.status, permanent=_MISSING_ROUTE)
        if cause is None:
            return Rejected(exc.status, detail)
        wait = parse_retry_after(exc.headers) if cause == RATE_LIMIT else None
        return Retryable(cause, detail, wait)
    if isinstance(exc, httpx.TimeoutException):
        if isinstance(exc, httpx.ConnectTimeout):
            return Retryable(CONNECTION, "connection error (connect timeout)")
        return Retryable(TIMEOUT, "request timed out")
    if isinstance(exc, httpx.TransportError):
        return Retryable(
            CONNECTION,
            f"connection error ({type(exc).__name__}: {exc})",
            unresolved=is_name_resolution_failure(exc),
        )
    return None


# --------------------------------------------------------------------------- the grader


class RewardModelGrader:
    """Scores each completion with a reward model served over HTTP (see module doc)."""

    needs_context = True  # it reads each sample's prompt (as the policy saw it)
    # It reads no reference: the reference self-check has nothing to check.
    reads_references = False

    def __init__(
        self,
        name: str,
        config: RewardModelConfig,
        *,
        score_range: ScoreRange | None = None,
        detect: bool = True,
    ) -> None:
        self.name = name
        self.config = config
        self.score_range = score_range
        self._secret = config.secret()
        self.stats = RemoteStats()
        self.policy = config.remote.policy()
        self._answered = False
        self._lock = threading.Lock()
        self.endpoint: str | None = None if config.endpoint == AUTO else config.endpoint
        if detect and self.endpoint is None:
            self.endpoint = self.detect()

    # -- the wire

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._secret is not None:
            headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        return headers

    def _url(self, endpoint: str) -> str:
        return f"{self.config.root}/{endpoint}"

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secret)

    async def _rewards(
        self, endpoint: str, items: Sequence[tuple[object, str]], caller: RemoteCaller
    ) -> list[GradeResult]:
        """One request per (prompt, completion); each failure is that item's error row."""
        results: list[GradeResult | None] = [None] * len(items)
        limits = httpx.Limits(max_connections=self.config.remote.concurrency)
        async with httpx.AsyncClient(timeout=None, limits=limits) as client:

            async def one(index: int) -> None:
                prompt, completion = items[index]
                try:
                    body = request_body(endpoint, prompt, completion, self.config.model)
                except GradingError as exc:
                    results[index] = error_result(str(exc))
                    return

                async def send() -> tuple[int, str, Any]:
                    resp = await client.post(
                        self._url(endpoint), json=body, headers=self._headers()
                    )
                    text = resp.text
                    if resp.status_code >= 300:
                        raise _Status(resp.status_code, text, resp.headers)
                    return resp.status_code, text, resp.headers

                def handle(answer: tuple[int, str, Any], attempt: Attempt) -> list[float]:
                    try:
                        data = json.loads(answer[1])
                    except ValueError:
                        raise Retryable(MALFORMED, "malformed response (not JSON)") from None
                    try:
                        return parse_answer(endpoint, data)
                    except GradingError as exc:
                        raise Retryable(MALFORMED, str(exc)) from None

                try:
                    values = await caller.call(send, handle)
                    results[index] = score_reward(reward_of(values), self.score_range)
                except GradingError as exc:
                    results[index] = error_result(self._scrub(str(exc)))
                except Rejected as exc:
                    results[index] = error_result(
                        self._scrub(f"{LABEL} refused the request: {exc.detail}")
                    )
                except GaveUp as exc:
                    results[index] = error_result(
                        self._scrub(f"{LABEL}: {exc.fault.message} (after {exc.attempts} attempts)")
                    )
                except (EndpointDown, Unreachable) as exc:
                    results[index] = error_result(self._scrub(f"{LABEL} unreachable: {exc}"))

            await run_pool(list(range(len(items))), self.config.remote.concurrency, one)
        return [r if r is not None else error_result(f"{LABEL}: no answer") for r in results]

    def _run(self, endpoint: str, items: Sequence[tuple[object, str]]) -> list[GradeResult]:
        """`_rewards` on a background event loop (the engine is synchronous)."""
        caller = self.config.remote.caller(
            classify_fault, policy=self.policy, stats=self.stats, answered=self._answered
        )
        out: list[list[GradeResult]] = []

        async def main(emit: Any) -> None:
            emit(await self._rewards(endpoint, items, caller))

        def crashed(exc: BaseException) -> BaseException:
            return RunError(self._scrub(f"{LABEL} requests failed: {type(exc).__name__}: {exc}"))

        for item in stream_from_loop(
            main, thread_name="curate-reward-model", on_crash=crashed, label=LABEL
        ):
            if item is not None:
                out.append(item)
        caller.finish()
        self._answered = self._answered or caller.answered
        return out[0] if out else []

    # -- detection

    def detect(self) -> str:
        """The first endpoint in ENDPOINTS that scores a probe; UsageError naming the URL
        when the server cannot be reached or serves none of them."""
        url = redact_url(self.config.root)
        tried: list[str] = []
        headers = self._headers()
        with httpx.Client(timeout=self.config.remote.timeout) as client:
            for endpoint in ENDPOINTS:
                body = request_body(endpoint, PROBE_PROMPT, PROBE_COMPLETION, self.config.model)
                try:
                    resp = client.post(self._url(endpoint), json=body, headers=headers)
                except httpx.HTTPError as exc:
                    raise UsageError(
                        self._scrub(
                            f"--reward-base-url {url}: cannot reach the {LABEL} "
                            f"({type(exc).__name__}: {exc}); start the server or fix the URL"
                        )
                    ) from None
                self._answered = True
                if resp.status_code in (401, 403):
                    raise UsageError(
                        self._scrub(
                            f"--reward-base-url {url}: {resp.status_code} "
                            f"{_server_detail(resp.status_code, resp.text)} (check "
                            "--reward-api-key-env)"
                        )
                    )
                if resp.status_code < 300:
                    try:
                        values = parse_answer(endpoint, resp.json())
                    except (GradingError, ValueError) as exc:
                        tried.append(f"/{endpoint}: {exc}")
                        continue
                    try:
                        reward_of(values)
                    except GradingError as exc:  # the model, not the route: say so now
                        raise UsageError(f"--reward-base-url {url}: {exc}") from None
                    return endpoint
                tried.append(
                    f"/{endpoint}: {resp.status_code} "
                    f"{_server_detail(resp.status_code, resp.text)[:80]}"
                )
        raise UsageError(
            self._scrub(
                f"--reward-base-url {url}: no classification endpoint scores a probe ("
                + "; ".join(tried)
                + "); serve a sequence-classification model (vLLM: --runner pooling)"
            )
        )

    # -- the Grader protocol

    def grade_batch(
        self,
        completions: Sequence[str],
        references: Sequence[object],
        contexts: Sequence[SampleContext] | None = None,
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        if not completions:
            return []
        rows: Sequence[Mapping[str, Any]] = contexts or [{} for _ in completions]
        items: list[tuple[object, str]] = []
        missing: set[int] = set()
        for i, (completion, row) in enumerate(zip(completions, rows, strict=True)):
            prompt = row.get("prompt")
            if prompt is None:
                missing.add(i)
            items.append((prompt, completion))
        with self._lock:
            if self.endpoint is None:
                self.endpoint = self.detect()
            endpoint = self.endpoint
        sent = [i for i in range(len(items)) if i not in missing]
        graded = dict(zip(sent, self._run(endpoint, [items[i] for i in sent]), strict=True))
        no_prompt = error_result(f"{LABEL}: no prompt for this rollout")
        return [graded.get(i, no_prompt) for i in range(len(items))]

    def manifest_record(self) -> dict[str, Any]:
        """What the run manifest keeps of this grader: no key, no URL credentials."""
        return {
            "base_url": redact_url(self.config.root),
            "model": self.config.model,
            "endpoint": self.endpoint,
        }

    def close(self) -> None:
        """Nothing held between batches (each batch opens and closes its client)."""

    def __repr__(self) -> str:
        return f"RewardModelGrader({redact_url(self.config.root)!r}, endpoint={self.endpoint!r})"


def reward_model_grader(
    spec: str, argument: str | None, options: GraderOptions
) -> RewardModelGrader:
    """The registry's factory for `reward-model`."""
    if argument:
        raise UsageError(
            f"grader {spec!r}: takes no argument; point --reward-base-url at the server"
        )
    config = options.kind_options
    if not isinstance(config, RewardModelConfig):
        raise UsageError(
            "--grader reward-model needs --reward-base-url URL (the reward model's server, "
            "e.g. http://127.0.0.1:8001)"
        )
    return RewardModelGrader(spec, config, score_range=options.score_range)
