"""Sampling settings shared by every request of a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

# Sampling keys a resume may change: they decide what is stored beside each rollout,
# not what any rollout is or scores.
STORAGE_ONLY_KEYS: Final = ("keep_token_logprobs",)


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """Sampling settings shared by every request of a run.

    `logprobs` (K): the backend also returns the sampled tokens' log-probabilities and
    the top K at each step, which the engine summarises as token confidence
    (`curate.stats.confidence`) over windows of `confidence_window` tokens; the
    per-token arrays are stored only with `keep_token_logprobs`. None: not asked.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    logprobs: int | None = None
    confidence_window: int | None = None
    keep_token_logprobs: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The manifest's `sampling`; the log-probability keys only when asked for, so a
        run made without them (or before they existed) records the same body."""
        body: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
        }
        if self.logprobs is not None:
            body["logprobs"] = self.logprobs
            body["confidence_window"] = self.confidence_window
        if self.keep_token_logprobs:
            body["keep_token_logprobs"] = True
        return body


# The defaults of --temperature, --top-p and --max-tokens.
DEFAULT_SAMPLING: Final = SamplingConfig()
