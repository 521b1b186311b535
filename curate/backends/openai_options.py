"""The OpenAI-compatible backend's options (`--backend openai`), read by
`open_openai`, the manifest and `curate eval`'s flags. Importing this module does not
import the openai SDK.

The key itself is never an option: `api_key_env` names the environment variable that
holds it, and the manifest records that name only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from curate.backends.options import BackendOptions, option
from curate.remote.settings import BACKEND, RemoteSettings


def _remote(name: str, help: str, *, flag: bool = True) -> Any:
    """An option whose default and range are the backend's remote settings' (declared
    once, in `curate.remote.settings`); the help is worded for the backend."""
    return option(getattr(BACKEND, name), help, min=RemoteSettings.bound(name), flag=flag)


@dataclass(frozen=True)
class OpenAIOptions(BackendOptions):
    """Where the endpoint is, how hard to drive it, and how to retry it: the flags of
    the backend's `RemoteSettings` (`remote`, built and validated once)."""

    label = "openai"
    panel = "OpenAI-compatible endpoint (--backend openai)"
    # The manifest keeps what the user typed (plus the key's variable name), so the
    # flags default to None and their help states the default.
    flags_default_to_none = True

    # Several URLs (--base-url repeated) make a pool of replicas of one model
    # (curate/remote/pool.py): a tuple here, a list in the manifest.
    base_url: str | tuple[str, ...] | None = option(
        None,
        "endpoint URL; repeat it for a pool of replicas of the model (each request goes to "
        "the one with the fewest in flight, a failing one is rested)",
        default_help="$OPENAI_BASE_URL, else OpenAI's",
    )
    api_key_env: str = option(
        BACKEND.api_key_env,
        "NAME of the environment variable holding the key (the key itself is never a flag)",
    )
    concurrency: int = _remote("concurrency", "requests in flight")
    requests_per_minute: float | None = _remote("requests_per_minute", "request rate limit")
    tokens_per_minute: float | None = _remote(
        "tokens_per_minute",
        "token rate limit (prompt + max_tokens per request, refunded by the usage the "
        "endpoint reports)",
    )
    timeout: float = _remote("timeout", "seconds per request attempt")
    max_retries: int = _remote(
        "max_retries",
        "retries of a failed request (429, 5xx, timeout, reset, malformed) before its "
        "rollouts are stored as errors",
    )
    # Library and test knobs: no flag.
    backoff_base: float = _remote("backoff_base", "first retry delay in seconds", flag=False)
    backoff_max: float = _remote("backoff_max", "longest retry delay in seconds", flag=False)
    transport: str = option(BACKEND.transport, "HTTP transport of the SDK client", flag=False)

    # The settings the backend runs with (not an option: built from the options).
    remote: RemoteSettings = field(default=BACKEND, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # One URL stays a string (as runs made before pools recorded it); several, a tuple.
        urls = self.base_url
        if isinstance(urls, list | tuple):
            if not urls:
                urls = None
            elif len(urls) == 1:
                urls = str(urls[0])
            else:
                urls = tuple(str(u) for u in urls)
            object.__setattr__(self, "base_url", urls)
        super().__post_init__()

    def urls(self) -> tuple[str, ...]:
        """The URLs given (empty: none, the environment's or OpenAI's then)."""
        if self.base_url is None:
            return ()
        return (self.base_url,) if isinstance(self.base_url, str) else tuple(self.base_url)

    def validate(self) -> None:
        """Building the remote settings validates them (ranges, URLs, the key's name)."""
        remote = RemoteSettings(
            base_urls=self.urls(),
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            backoff_max=self.backoff_max,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            transport=self.transport,
        )
        object.__setattr__(self, "remote", remote)

    def record(self) -> dict[str, Any]:
        recorded = super().record()
        # Where the key comes from is part of the record (its name only, never its value).
        recorded.setdefault("api_key_env", self.api_key_env)
        if isinstance(recorded.get("base_url"), tuple):
            recorded["base_url"] = list(recorded["base_url"])  # as JSON reads it back
        return recorded
