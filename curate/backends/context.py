"""What a backend can say about context length before anything is generated: the
model's context window and the token count of a prompt as the model will see it.

* Local model directory (the vLLM engine): the window is `--max-model-len` when given,
  else the config's `max_position_embeddings`; prompts are rendered with the model's
  chat template (chat mode) and counted with its `tokenizer.json`.
* OpenAI-compatible endpoint: the window is the `/v1/models` card's `max_model_len`
  (vLLM, SGLang and others publish it; OpenAI's API does not); prompts are counted by
  the server's own `/tokenize` (vLLM's, at the server root) when it has one. Without
  it the count is a lower bound of one token per `LOWER_BOUND_CHARS` characters, so
  a prompt is only refused when it certainly does not fit.

Every probe is best effort: what cannot be learned is None, and the run goes on (a
prompt the endpoint then rejects becomes its own error rows).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.core.prompts import Mode, Prompt

# No real tokenizer averages more characters per token than this (English BPE is ~4).
LOWER_BOUND_CHARS = 8
# Seconds per probe request.
PROBE_TIMEOUT_S = 10.0
# Config keys that hold a model's context window, first found wins.
_WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


@dataclass(frozen=True)
class Counter:
    """Counts one prompt's tokens; `exact` False: a lower bound."""

    count: Callable[[Prompt], int | None]
    name: str
    exact: bool


# ------------------------------------------------------------------------- local model


def local_window(model: str, max_model_len: int | None) -> tuple[int, str] | None:
    """(window, where it came from) for a local model directory; None when unknown."""
    if max_model_len is not None:
        return max_model_len, "--max-model-len"
    try:
        config = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    for key in _WINDOW_KEYS:
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value, f"the model's {key}"
    return None


def local_counter(
    model: str, mode: Mode, render: Callable[[str, list[dict[str, Any]]], str | None]
) -> Counter | None:
    """The model's own tokenizer over the prompt as the engine renders it (`render`:
    messages -> text through the model's chat template); None when the directory has
    no tokenizer.json."""
    path = Path(model) / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path))
    except Exception:  # an unusual tokenizer file: no exact count
        return None

    def count(prompt: Prompt) -> int | None:
        if isinstance(prompt, str) and mode == "completion":
            # vLLM's generate() adds the tokenizer's special tokens (BOS).
            return len(tokenizer.encode(prompt, add_special_tokens=True).ids)
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        text = render(model, messages)
        if text is None:
            return None
        # The template writes its own special tokens.
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return Counter(count, "the model's tokenizer", exact=True)


# ---------------------------------------------------------------------------- endpoint


class Endpoint:
    """Probes one OpenAI-compatible endpoint (`base_url` ends in /v1 for most servers);
    the key goes in the Authorization header and nowhere else."""

    def __init__(self, base_url: str, model: str, key: str | None) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(headers=headers, timeout=PROBE_TIMEOUT_S)
        self._tokenize: bool | None = None  # None: not tried yet

    def close(self) -> None:
        self._client.close()

    def _json(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self._client.request(method, url, json=body)
        except Exception:  # unreachable, refused, timed out: the run says so later
            return None
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def window(self) -> tuple[int, str] | None:
        """The served model's `max_model_len` from its /models card."""
        data = self._json("GET", f"{self.base_url}/models")
        cards = data.get("data") if isinstance(data, dict) else None
        for card in cards if isinstance(cards, list) else []:
            if isinstance(card, dict) and card.get("id") == self.model:
                value = card.get("max_model_len")
                if isinstance(value, int) and value > 0:
                    return value, "the endpoint's max_model_len"
        return None

    def counter(self, mode: Mode) -> Counter:
        """The server's /tokenize when it answers, else the lower bound."""
        root = self.base_url.removesuffix("/v1")

        def count(prompt: Prompt) -> int | None:
            if self._tokenize is not False:
                body: dict[str, Any] = {"model": self.model}
                if mode == "chat":
                    body["messages"] = (
                        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
                    )
                    body["add_generation_prompt"] = True
                else:
                    body["prompt"] = prompt if isinstance(prompt, str) else _text(prompt)
                data = self._json("POST", f"{root}/tokenize", body)
                value = data.get("count") if isinstance(data, dict) else None
                if isinstance(value, int):
                    self._tokenize = True
                    return value
                if self._tokenize is None:
                    self._tokenize = False  # no tokenizer endpoint: estimate from here on
            return lower_bound(prompt)

        return Counter(count, "the endpoint's /tokenize", exact=True)

    @property
    def exact(self) -> bool:
        return bool(self._tokenize)


def lower_bound(prompt: Prompt) -> int:
    """A count no tokenizer goes below: one token per LOWER_BOUND_CHARS characters."""
    text = prompt if isinstance(prompt, str) else _text(prompt)
    return math.floor(len(text) / LOWER_BOUND_CHARS)


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)
