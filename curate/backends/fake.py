"""A fake backend for unit tests and fault injection (never used for real numbers).

Each prompt's completion is drawn from a seeded RNG: the correct answer with the
prompt's pass rate, else a wrong one. Failures can be injected per sample, and a
delay per request makes a slow engine (for tests of concurrent or killed runs; from
the command line, set CURATE_FAKE_DELAY_S, since `curate eval` passes the fake
backend no options).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    Prompt,
    SamplingConfig,
)
from curate.backends.options import BackendOptions, option


def prompt_text(prompt: Prompt) -> str:
    """The last user message of a chat prompt, or the prompt text itself."""
    if isinstance(prompt, str):
        return prompt
    users = [m["content"] for m in prompt if m.get("role") == "user"]
    return str(users[-1]) if users else ""


# Long completions are made-up words with Zipf frequencies, fresh for every rollout: no
# digits (a grader that read past the think block finds no stray number), and compressible
# about as prose is, rather than one repeated block that a codec would find. They are drawn
# a phrase at a time from 65,536 phrases of 2-8 words (cheap enough for ~100k rollouts/s).
_PHRASES: list[str] = []


def _phrases() -> list[str]:
    if not _PHRASES:
        rng = random.Random(0)
        letters = "etaoinshrdlcumwfgypbvkjxqz"
        weights = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
        vocab = ["".join(rng.choices(letters, weights, k=rng.randint(1, 9))) for _ in range(4096)]
        zipf = [1 / (rank + 1) for rank in range(len(vocab))]
        words = rng.choices(vocab, zipf, k=65536 * 5)
        at = 0
        for _ in range(65536):
            k = rng.randint(2, 8)
            _PHRASES.append(" ".join(words[at : at + k]))
            at += k
    return _PHRASES


def long_text(rng: random.Random, lo: int, hi: int) -> str:
    """A `<think>` block of lo..hi characters of filler, drawn from `rng`."""
    phrases = _phrases()
    length = rng.randint(lo, hi)
    # Two random bytes pick a phrase; phrases average about 30 characters with their space.
    picks = memoryview(rng.randbytes(2 * (length // 20 + 1))).cast("H")
    return f"<think>{' '.join(map(phrases.__getitem__, picks))[:length]}</think>"


def made_up_logprobs(
    rng: random.Random, n: int, k: int, *, sure: bool
) -> tuple[list[float], list[list[float]]]:
    """Made-up log-probabilities of n tokens with k alternatives each, sharper on a
    right answer than on a wrong one (so a report has something to find); never
    numbers of a model."""
    spread = 6.0 if sure else 2.0
    sampled, tops = [], []
    for _ in range(n):
        top = -abs(rng.gauss(0.0, 0.05 if sure else 0.4))
        step = sorted([top, *(top - spread * rng.random() - 0.5 for _ in range(k - 1))])[::-1]
        sampled.append(step[0])
        tops.append(step)
    return sampled, tops


@dataclass
class FakeBackend:
    """`answers` maps prompt text -> (correct answer, pass rate)."""

    answers: Mapping[str, tuple[str, float]]
    model: str = "fake"
    has_chat_template: bool = True
    fail: Callable[[GenerationRequest], str | None] = lambda req: None
    calls: list[int] = field(default_factory=list)
    delay_s: float = 0.0  # seconds slept per request
    # (lo, hi): each completion starts with a think block of lo..hi characters.
    completion_chars: tuple[int, int] | None = None

    def info(self) -> BackendInfo:
        return BackendInfo(
            model=self.model,
            has_chat_template=self.has_chat_template,
            chat_template_sha256="fake-template" if self.has_chat_template else None,
        )

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]:
        self.calls.append(len(requests))
        if self.delay_s > 0:
            time.sleep(self.delay_s * len(requests))
        out = []
        for req in requests:
            error = self.fail(req)
            if error is not None:
                out.append([Generation(text=None, error=error) for _ in range(req.n)])
                continue
            prompt = prompt_text(req.prompt)
            answer, rate = self.answers.get(prompt, ("?", 0.0))
            rng = random.Random(req.seed)
            gens = []
            for _ in range(req.n):
                ok = rng.random() < rate
                text = answer if ok else f"{answer}9"
                if self.completion_chars is not None:
                    text = long_text(rng, *self.completion_chars) + text
                # One character is one token: a text longer than max_tokens is cut there.
                cut = len(text) > sampling.max_tokens
                gen = Generation(
                    text=text[: sampling.max_tokens] if cut else text,
                    finish_reason="length" if cut else "stop",
                    prompt_tokens=len(prompt),
                    completion_tokens=min(len(text), sampling.max_tokens),
                    token_count_source="exact",
                )
                if sampling.logprobs:
                    n_tokens = gen.completion_tokens or 0
                    gen.token_logprobs, gen.top_logprobs = made_up_logprobs(
                        rng, n_tokens, sampling.logprobs, sure=ok
                    )
                gens.append(gen)
            out.append(gens)
        return out


@dataclass(frozen=True)
class FakeOptions(BackendOptions):
    """The fake backend's options: what it answers, and how slowly."""

    label = "fake"

    answers: Mapping[str, Any] | None = option(
        None, "prompt text -> (correct answer, pass rate)", flag=False
    )
    delay_s: float | None = option(None, "seconds to sleep per request", min=0.0, flag=False)
    completion_chars: tuple[int, int] | None = option(
        None, "(lo, hi): completions with a think block of lo..hi characters", flag=False
    )


@contextlib.contextmanager
def open_fake(
    model: str, options: FakeOptions | None = None, *, seed: int = 0, **given: Any
) -> Iterator[FakeBackend]:
    """A fake backend; `given` is the keyword form of `options`. The seed is per request.
    CURATE_FAKE_DELAY_S, when no delay is given, lets a real `curate eval` process run
    slowly (the concurrent-writer tests need one that is still running)."""
    opts = options if options is not None else FakeOptions.parse(given)
    delay_s = opts.delay_s
    if delay_s is None:
        delay_s = float(os.environ.get("CURATE_FAKE_DELAY_S") or 0)
    chars = opts.completion_chars
    if chars is None and os.environ.get("CURATE_FAKE_COMPLETION_CHARS"):
        lo, _, hi = os.environ["CURATE_FAKE_COMPLETION_CHARS"].partition(":")
        chars = (int(lo), int(hi or lo))
    yield FakeBackend(
        answers=dict(opts.answers or {}),
        model=model,
        delay_s=delay_s,
        completion_chars=None if chars is None else (int(chars[0]), int(chars[1])),
    )
