"""The context check, before anything is generated or written: the longest prompt plus
max_tokens against the model's context window (`curate.backends.context` says what
each backend can learn). A run that cannot fit is refused with one line naming the
option to change (exit 2); `--no-context-check` skips it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from curate.backends.context import LOWER_BOUND_CHARS, Endpoint, local_counter, local_window
from curate.errors import UsageError
from curate.evaluation.preflight import apply_local_template
from curate.remote.settings import RemoteSettings

if TYPE_CHECKING:
    from curate.core.prompts import Mode, Prompt
    from curate.evaluation.options import EvalOptions

# Prompts tokenised, the longest by characters first: the longest in tokens is among
# them unless token density varies wildly across the data set.
CHECKED_PROMPTS = 256
# Fewer for an endpoint: each is one HTTP request.
CHECKED_REMOTE = 16


@dataclass(frozen=True)
class ContextCheck:
    """The longest prompt (of those counted) and what it needs."""

    window: int
    window_source: str  # where the window came from: "--max-model-len", ...
    sample_id: str
    prompt_tokens: int
    exact: bool  # False: a lower bound (no tokenizer available)
    counted_by: str
    max_tokens: int
    backend: str
    config_window: int | None = None  # a local model's own limit, when larger

    @property
    def needed(self) -> int:
        return self.prompt_tokens + self.max_tokens

    def refusal(self) -> UsageError | None:
        """The one-line error when the longest prompt plus max_tokens does not fit."""
        if self.needed <= self.window:
            return None
        how = "" if self.exact else "at least "
        head = (
            f"context: the longest prompt (sample {self.sample_id!r}, {how}"
            f"{self.prompt_tokens:,} tokens by {self.counted_by}) plus --max-tokens "
            f"{self.max_tokens:,} needs {self.needed:,} tokens, over the model's "
            f"{self.window:,} ({self.window_source})"
        )
        fixes = []
        room = self.window - self.prompt_tokens
        if room >= 1:
            fixes.append(f"lower --max-tokens to {room:,} or less")
        else:
            fixes.append("shorten or drop that prompt (--max-tokens alone cannot make it fit)")
        if self.config_window is not None and self.config_window >= self.needed:
            fixes.append(
                f"raise --max-model-len to {self.needed:,} (the model allows "
                f"{self.config_window:,})"
            )
        fixes.append("pass --no-context-check to run anyway (what does not fit fails)")
        return UsageError(f"{head}: {'; or '.join(fixes)}")


def check_context(opts: EvalOptions, prompts: dict[str, Prompt], mode: Mode) -> ContextCheck | None:
    """The check for `opts`' backend over `prompts` (sample id -> prompt as built for
    `mode`); None when the backend cannot tell the window (a hub model, an endpoint
    without a max_model_len)."""
    if not prompts:
        return None
    if opts.backend == "vllm":
        return _local(opts, prompts, mode)
    if opts.backend == "openai":
        return _endpoint(opts, prompts, mode)
    return None


def _longest(prompts: dict[str, Prompt], k: int) -> list[tuple[str, Prompt]]:
    def chars(prompt: Prompt) -> int:
        if isinstance(prompt, str):
            return len(prompt)
        return sum(len(str(m.get("content") or "")) for m in prompt)

    return sorted(prompts.items(), key=lambda item: -chars(item[1]))[:k]


def _local(opts: EvalOptions, prompts: dict[str, Prompt], mode: Mode) -> ContextCheck | None:

    given = opts.backend_options()
    limit = getattr(given, "max_model_len", None)
    window = local_window(opts.model, limit)
    counter = local_counter(opts.model, mode, apply_local_template)
    if window is None or counter is None:
        return None
    counts = [(sid, counter.count(p)) for sid, p in _longest(prompts, CHECKED_PROMPTS)]
    known = [(sid, n) for sid, n in counts if n is not None]
    if not known:
        return None
    sid, tokens = max(known, key=lambda item: item[1])
    own = local_window(opts.model, None) if limit is not None else None
    return ContextCheck(
        window=window[0],
        window_source=window[1],
        sample_id=sid,
        prompt_tokens=tokens,
        exact=True,
        counted_by=counter.name,
        max_tokens=opts.max_tokens,
        backend=opts.backend,
        config_window=own[0] if own is not None and own[0] > window[0] else None,
    )


def _endpoint(opts: EvalOptions, prompts: dict[str, Prompt], mode: Mode) -> ContextCheck | None:

    remote = getattr(opts.backend_options(), "remote", None)
    if not isinstance(remote, RemoteSettings):
        return None
    # A pool's endpoints serve the same model: the first one speaks for them.
    urls = remote.urls()
    if not urls:
        return None  # OpenAI's own API publishes no max_model_len: nothing to check against
    url = urls[0]
    try:
        import httpx  # noqa: F401  (comes with the openai extra)
    except ImportError:
        return None
    secret = remote.api_key()
    endpoint = Endpoint(url, opts.model, secret.reveal() if secret is not None else None)
    try:
        window = endpoint.window()
        if window is None:
            return None
        counter = endpoint.counter(mode)
        counts = [(sid, counter.count(p)) for sid, p in _longest(prompts, CHECKED_REMOTE)]
        exact = endpoint.exact
    finally:
        endpoint.close()
    known = [(sid, n) for sid, n in counts if n is not None]
    if not known:
        return None
    sid, tokens = max(known, key=lambda item: item[1])
    return ContextCheck(
        window=window[0],
        window_source=window[1],
        sample_id=sid,
        prompt_tokens=tokens,
        exact=exact,
        counted_by=counter.name if exact else f"1 per {LOWER_BOUND_CHARS} characters",
        max_tokens=opts.max_tokens,
        backend=opts.backend,
    )
