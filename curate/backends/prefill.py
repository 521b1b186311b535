"""Prefill scoring: the log-probability of every token of a known continuation, read in
one forward pass of the model that generated the rollouts (no sampling).

`--grader r3` (curate/graders/r3.py) asks, for each rollout, how likely the model finds
the reference answer after the rollout's reasoning: the sequence is the prompt as the
model saw it, then the rollout's reasoning, then the reference. The three parts are
tokenized apart (the prompt with the chat template and the model's special tokens, the
other two without) and joined as token ids, so the reference's tokens are exactly the
last ones, whatever the tokenizer would have merged across the joins.

* offline: `vllm.LLM.generate` on the token ids with ``SamplingParams(max_tokens=1,
  prompt_logprobs=0)``: `RequestOutput.prompt_logprobs` holds, for every position after
  the first, the logprob of the token there (`vllm_reference_logprobs`);
* a vLLM server: ``POST /tokenize`` (chat messages with the template, or text) for the
  ids, then ``POST /v1/completions`` with the ids as the prompt, ``max_tokens=1`` and
  vLLM's ``prompt_logprobs=0`` extension, which returns the same list in each choice
  (`server_reference_logprobs`). vLLM's echo path (``echo`` + ``logprobs``) needs the
  prompt's text, which a prompt of token ids has not, so the extension is used. An
  endpoint without ``/tokenize`` or without the extension (not vLLM) gets one line
  saying so (`PrefillUnsupported`).

Both paths score the same ids through the same engine, so they agree up to the float
arithmetic of batching (the slow test states the tolerance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from curate.core.prompts import Mode, Prompt
from curate.errors import RunError

# Sequences per server request (the completions endpoint takes a list of prompts).
SERVER_BATCH = 32


class PrefillUnsupported(RunError):
    """The backend cannot read prompt log-probabilities (one line for the user)."""


@dataclass(frozen=True, slots=True)
class PrefillItem:
    """One sequence to score: `prompt` as the model saw it, `context` (the rollout's
    reasoning, with its tags), then `target` (the reference), whose tokens are scored."""

    prompt: Prompt
    context: str
    target: str


@dataclass(frozen=True, slots=True)
class PrefillResult:
    """The target's tokens (as text) and their log-probabilities, or why not (`error`).
    `tokens_in` counts the whole prefilled sequence (the run's token tally)."""

    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()
    tokens_in: int = 0
    error: str | None = None


@runtime_checkable
class PrefillBackend(Protocol):
    """A backend that can score known continuations (`reference_logprobs`)."""

    def reference_logprobs(self, items: Sequence[PrefillItem], mode: Mode) -> list[PrefillResult]:
        """One result per item, in order; an item it cannot score is an error result."""
        ...


# --------------------------------------------------------------------------- offline


def _encode(tokenizer: Any, text: str, *, special: bool) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=special))


def prompt_ids(tokenizer: Any, prompt: Prompt, mode: Mode) -> list[int]:
    """The prompt's token ids as the engine sees them: a chat prompt through the chat
    template (ending with the assistant's opening), a text prompt with special tokens."""
    if mode == "chat" and not isinstance(prompt, str):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return _encode(tokenizer, str(text), special=False)
    text = prompt if isinstance(prompt, str) else str(prompt)
    return _encode(tokenizer, text, special=True)


def _context_limit(llm: Any) -> int | None:
    config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
    value = getattr(config, "max_model_len", None)
    return int(value) if isinstance(value, int) else None


def vllm_reference_logprobs(
    llm: Any, items: Sequence[PrefillItem], mode: Mode
) -> list[PrefillResult]:
    """Score `items` on an offline `vllm.LLM` (see the module docstring)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    tokenizer = llm.get_tokenizer()
    limit = _context_limit(llm)
    results: list[PrefillResult | None] = [None] * len(items)
    batch: list[tuple[int, list[int], int]] = []  # (item index, ids, target length)
    for index, item in enumerate(items):
        target = _encode(tokenizer, item.target, special=False)
        ids = [
            *prompt_ids(tokenizer, item.prompt, mode),
            *_encode(tokenizer, item.context, special=False),
            *target,
        ]
        if not target:
            results[index] = PrefillResult(error="prefill: the reference has no tokens")
        elif limit is not None and len(ids) >= limit:
            results[index] = PrefillResult(
                error=f"prefill: {len(ids)} tokens do not fit the context window ({limit})"
            )
        else:
            batch.append((index, ids, len(target)))
    if batch:
        # detokenize=False: vLLM would otherwise decode every prompt position's token
        # (most of the cost on CPU); only the reference's tokens are decoded, below, as
        # the server decodes them.
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)
        # Called between generation chunks, never while the engine streams (it would
        # return other requests' outputs too): curate/evaluation/runner.py sees to it.
        outputs = llm.generate(
            [TokensPrompt(prompt_token_ids=ids) for _, ids, _ in batch],
            sampling_params=params,
            use_tqdm=False,
        )
        if len(outputs) != len(batch):
            raise RunError(f"prefill: {len(batch)} sequences sent, {len(outputs)} outputs back")
        for (index, ids, width), out in zip(batch, outputs, strict=True):
            results[index] = _read_offline(ids, width, out.prompt_logprobs, tokenizer)
    return [r if r is not None else PrefillResult(error="prefill: no result") for r in results]


def _read_offline(ids: list[int], width: int, positions: Any, tokenizer: Any) -> PrefillResult:
    from vllm.tokenizers.detokenizer_utils import convert_ids_list_to_tokens

    if positions is None or len(positions) != len(ids):
        return PrefillResult(error="prefill: the engine returned no prompt log-probabilities")
    target = ids[len(ids) - width :]
    logprobs = [float(positions[k][ids[k]].logprob) for k in range(len(ids) - width, len(ids))]
    tokens = convert_ids_list_to_tokens(tokenizer, target)
    return PrefillResult(tuple(tokens), tuple(logprobs), tokens_in=len(ids))


# --------------------------------------------------------------------------- server


def _root(url: str) -> str:
    """The server's root from its OpenAI base URL (``http://h:p/v1`` -> ``http://h:p``)."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def server_reference_logprobs(
    url: str,
    key: str | None,
    model: str,
    items: Sequence[PrefillItem],
    mode: Mode,
    *,
    timeout_s: float = 120.0,
) -> list[PrefillResult]:
    """Score `items` at a vLLM server whose OpenAI base URL is `url` (see the module
    docstring). Raises PrefillUnsupported for an endpoint without the vLLM routes."""
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    root = _root(url)
    results: list[PrefillResult] = []
    with httpx.Client(timeout=timeout_s, headers=headers) as client:

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            try:
                response = client.post(root + path, json=body)
            except httpx.HTTPError as exc:
                raise RunError(f"prefill: {path} at {root}: {type(exc).__name__}") from exc
            if response.status_code in (404, 405):
                raise PrefillUnsupported(
                    f"{root} has no {path}: --grader r3 reads prompt log-probabilities "
                    "through vLLM's /tokenize and prompt_logprobs (serve the model with vllm serve)"
                )
            if response.status_code != 200:
                detail = " ".join(response.text.split())[:200]
                raise RunError(f"prefill: {path} answered {response.status_code}: {detail}")
            data: dict[str, Any] = response.json()
            return data

        def tokenize(body: dict[str, Any]) -> list[int]:
            return [int(t) for t in post("/tokenize", {"model": model, **body})["tokens"]]

        prepared: list[tuple[list[int], int]] = []
        for item in items:
            if mode == "chat" and not isinstance(item.prompt, str):
                head = tokenize({"messages": item.prompt, "add_generation_prompt": True})
            else:
                head = tokenize({"prompt": str(item.prompt), "add_special_tokens": True})
            context = tokenize({"prompt": item.context, "add_special_tokens": False})
            target = tokenize({"prompt": item.target, "add_special_tokens": False})
            prepared.append(([*head, *context, *target], len(target)))
        for start in range(0, len(prepared), SERVER_BATCH):
            part = prepared[start : start + SERVER_BATCH]
            body = {
                "model": model,
                "prompt": [ids for ids, _ in part],
                "max_tokens": 1,
                "temperature": 0.0,
                "prompt_logprobs": 0,
            }
            choices = sorted(post("/v1/completions", body).get("choices", []), key=_index)
            if len(choices) != len(part):
                raise RunError(f"prefill: {len(part)} prompts sent, {len(choices)} choices back")
            for (ids, width), choice in zip(part, choices, strict=True):
                results.append(_read_server(ids, width, choice.get("prompt_logprobs"), root))
    return results


def _index(choice: dict[str, Any]) -> int:
    return int(choice.get("index", 0))


def _read_server(ids: list[int], width: int, positions: Any, root: str) -> PrefillResult:
    if positions is None:
        raise PrefillUnsupported(
            f"{root} returned no prompt_logprobs: --grader r3 needs vLLM's prompt_logprobs "
            "extension of the completions endpoint"
        )
    if width == 0:
        return PrefillResult(error="prefill: the reference has no tokens")
    if len(positions) != len(ids):
        return PrefillResult(error="prefill: the server scored another number of tokens")
    tokens, logprobs = [], []
    for k in range(len(ids) - width, len(ids)):
        entry = (positions[k] or {}).get(str(ids[k]))
        if entry is None:
            return PrefillResult(error=f"prefill: no log-probability for token {k}")
        tokens.append(str(entry.get("decoded_token") or ""))
        logprobs.append(float(entry["logprob"]))
    return PrefillResult(tuple(tokens), tuple(logprobs), tokens_in=len(ids))
