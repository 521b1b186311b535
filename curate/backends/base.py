"""The backend interface: one generate call. Starting and stopping an engine is
the job of the context manager that `open_backend` returns, not of the interface."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from curate.core.prompts import Message, Mode, Prompt
from curate.core.sampling import SamplingConfig

# The prompt and sampling types are the ground floor's; backends speak them.
__all__ = [
    "Backend",
    "BackendInfo",
    "Generation",
    "GenerationRequest",
    "Message",
    "Mode",
    "Prompt",
    "SamplingConfig",
    "StreamingBackend",
]


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """`n` completions of one prompt. `first_run` is the run index of the first one."""

    sample_id: str
    prompt: Prompt
    n: int
    first_run: int
    seed: int | None = None


@dataclass(slots=True)
class Generation:
    """One completion, or the error that stopped it (an error is data, not a score)."""

    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    attempts: int = 1
    error: str | None = None
    # The seed of the request that produced it, when it differs by rollout (one request
    # per rollout); None: the GenerationRequest's seed.
    seed: int | None = None
    # Reasoning the backend separated from `text` (a server's reasoning field, vLLM's
    # reasoning parser); None: not separated (the engine splits `text` at </think>).
    # `reasoning_closed`: whether it ended; `text` is then the answer.
    reasoning: str | None = None
    reasoning_closed: bool | None = None
    # With `error`: True when the same request fails the same way again (the prompt
    # does not fit the context), so a re-run does not retry it (curate.core.settled).
    settled: bool = False
    # How the token counts were made (curate.core.rollout.TOKEN_COUNT_SOURCES); None:
    # no counts.
    token_count_source: str | None = None
    # With `SamplingConfig.logprobs` (K): each generated token's log-probability, and
    # the top K log-probabilities at its step (reasoning tokens included).
    token_logprobs: list[float] | None = None
    top_logprobs: list[list[float]] | None = None


@dataclass(slots=True)
class BackendInfo:
    """What a backend tells the manifest about the model it serves."""

    model: str
    has_chat_template: bool
    chat_template_sha256: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """Generates completions; returns one list of `request.n` generations per request."""

    def info(self) -> BackendInfo: ...

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]: ...


@runtime_checkable
class StreamingBackend(Backend, Protocol):
    """A backend that can hand back each request's generations as soon as they finish.

    `stream` yields (index into `requests`, that request's generations) in
    completion order, and None now and then while nothing has finished, so the
    engine can write what it holds to disk within seconds.
    """

    def stream(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> Iterator[tuple[int, list[Generation]] | None]: ...
