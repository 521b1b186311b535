"""The OpenAI-compatible backend's options (`--backend openai`), read by
`open_openai`, the manifest and `curate eval`'s flags. Importing this module does not
import the openai SDK.

The key itself is never an option: `api_key_env` names the environment variable that
holds it, and the manifest records that name only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from curate.backends.options import BackendOptions, option
from curate.errors import UsageError

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class OpenAIOptions(BackendOptions):
    """Where the endpoint is, how hard to drive it, and how to retry it."""

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
        DEFAULT_KEY_ENV,
        "NAME of the environment variable holding the key (the key itself is never a flag)",
    )
    concurrency: int = option(32, "requests in flight", min=1)
    requests_per_minute: float | None = option(None, "request rate limit", min=0.001)
    tokens_per_minute: float | None = option(
        None,
        "token rate limit (prompt + max_tokens per request, refunded by the usage the "
        "endpoint reports)",
        min=1,
    )
    timeout: float = option(120.0, "seconds per request attempt", min=0.001)
    max_retries: int = option(
        8,
        "retries of a failed request (429, 5xx, timeout, reset, malformed) before its "
        "rollouts are stored as errors",
        min=0,
    )
    # Library and test knobs: no flag.
    backoff_base: float = option(0.5, "first retry delay in seconds", min=0.0, flag=False)
    backoff_max: float = option(30.0, "longest retry delay in seconds", min=0.0, flag=False)
    transport: str = option("auto", "HTTP transport of the SDK client", flag=False)

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
        super().validate()
        urls = self.urls()
        if len(set(urls)) < len(urls):
            raise UsageError("--base-url: the same URL is given twice")
        if not _ENV_NAME.fullmatch(str(self.api_key_env)):
            # Do not echo the value: it may be the key, pasted where its name belongs.
            raise UsageError("--api-key-env takes the NAME of an environment variable, not a key")
        if any(urlsplit(url).password for url in urls):
            raise UsageError(
                "--base-url must not carry a password: put the key in an environment "
                "variable and name it with --api-key-env"
            )

    def record(self) -> dict[str, Any]:
        recorded = super().record()
        # Where the key comes from is part of the record (its name only, never its value).
        recorded.setdefault("api_key_env", self.api_key_env)
        if isinstance(recorded.get("base_url"), tuple):
            recorded["base_url"] = list(recorded["base_url"])  # as JSON reads it back
        return recorded
