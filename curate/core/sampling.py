"""Sampling settings shared by every request of a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class SamplingConfig:
    """Sampling settings shared by every request of a run."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
        }


# The defaults of --temperature, --top-p and --max-tokens.
DEFAULT_SAMPLING: Final = SamplingConfig()
