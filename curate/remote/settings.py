"""The settings every HTTP client of curate shares, declared once.

`RemoteSettings` is where a client's endpoint is (the URLs given, else
`$OPENAI_BASE_URL`), where its key comes from (the NAME of an environment variable,
never the key), and how hard to drive it: concurrency, the per-attempt timeout,
retries and their backoff, request and token pacing, the HTTP transport. The OpenAI
backend, the LLM judge and the reward-model grader each build one value of it and
validate it once, when it is built; the remote-call core reads it through `policy()`,
`pacer()` and `caller()`.

The three clients keep different defaults on purpose, declared side by side below
(`BACKEND`, `JUDGE`, `REWARD_MODEL`) rather than copied into each client:

- the backend's request carries all N rollouts of a sample (minutes of generation), so
  it retries longest (8) and keeps the most requests in flight (32);
- a judge request is one short judgement at grading time, cached in the run directory
  so a failed one is redone by the next `curate grade`: fewer retries (6) and half the
  concurrency (16), which the judge guide's measurements were taken at;
- the reward model is a local classifier answering in one forward pass: a shorter
  timeout (60 s), the fewest retries (4, a server that fails that often is down), and
  16 in flight. It takes no key unless one is named.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from curate.errors import UsageError
from curate.remote.caller import Classifier, RemoteCaller
from curate.remote.pacing import Pacer
from curate.remote.retry import RetryPolicy
from curate.remote.secrets import Secret, redact_url
from curate.remote.stats import RemoteStats

# The conventions of OpenAI's SDK, which every OpenAI-compatible client follows.
OPENAI_KEY_ENV: Final = "OPENAI_API_KEY"
OPENAI_URL_ENV: Final = "OPENAI_BASE_URL"
# Local servers (`vllm serve` without --api-key) want some key; the SDK refuses none.
PLACEHOLDER_KEY: Final = "EMPTY"
TRANSPORTS: Final = ("auto", "aiohttp", "httpx")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The retry numbers are the policy's own defaults (one declaration, in retry.py).
_POLICY: Final = RetryPolicy()


def _setting(default: Any, *, min: float | None = None) -> Any:
    """A field with its inclusive lower bound (checked by `RemoteSettings.validate`,
    and read by the backend's option schema for its flags)."""
    return field(default=default, metadata={"min": min})


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """Where a remote service is and how to call it. Holds no secret."""

    # The URLs given (several: a pool of replicas); empty: $OPENAI_BASE_URL, else the
    # client's fallback (see `urls`).
    base_urls: tuple[str, ...] = ()
    # The NAME of the environment variable holding the key; None: no key at all.
    api_key_env: str | None = OPENAI_KEY_ENV
    concurrency: int = _setting(32, min=1)  # requests in flight
    timeout: float = _setting(120.0, min=0.001)  # seconds per attempt, sent to whole body
    max_retries: int = _setting(_POLICY.max_retries, min=0)
    backoff_base: float = _setting(_POLICY.backoff_base, min=0.0)  # first retry's wait
    backoff_max: float = _setting(_POLICY.backoff_max, min=0.0)
    retry_after_max: float = _setting(_POLICY.retry_after_max, min=0.0)
    requests_per_minute: float | None = _setting(None, min=0.001)
    tokens_per_minute: float | None = _setting(None, min=1)
    transport: str = "auto"  # the SDK's HTTP transport: aiohttp when installed, or httpx
    # How this client's flags are spelled ("--judge-" makes --judge-concurrency), so
    # that every message names the flag the user typed.
    flag_prefix: str = field(default="--", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_urls", tuple(str(u) for u in self.base_urls))
        self.validate()

    def flag(self, name: str) -> str:
        """The flag that sets `name` for this client."""
        return self.flag_prefix + name.replace("_", "-")

    def validate(self) -> None:
        """Every bound, the transport and the URLs; UsageError naming the flag."""
        for f in dataclasses.fields(self):
            low = f.metadata.get("min")
            value = getattr(self, f.name)
            if low is None or value is None:
                continue
            # `not >=` so that NaN fails too.
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= low:
                raise UsageError(f"{self.flag(f.name)} must be at least {low:g}, not {value!r}")
            if not math.isfinite(value):  # None, not infinity, means "no limit"
                raise UsageError(f"{self.flag(f.name)} must be a finite number, not {value!r}")
        if self.api_key_env is not None and not _ENV_NAME.fullmatch(str(self.api_key_env)):
            # Do not echo the value: it may be the key, pasted where its name belongs.
            raise UsageError(
                f"{self.flag('api_key_env')} takes the NAME of an environment variable, not a key"
            )
        if self.transport not in TRANSPORTS:
            raise UsageError(
                f"unknown transport {self.transport!r} ({', '.join(TRANSPORTS[:-1])} "
                f"or {TRANSPORTS[-1]})"
            )
        if len(set(self.base_urls)) < len(self.base_urls):
            raise UsageError(f"{self.flag('base_url')}: the same URL is given twice")
        if any(urlsplit(url).password for url in self.base_urls):
            # Never echo the URL: the password is in it.
            raise UsageError(
                f"{self.flag('base_url')} must not carry a password: put the key in an "
                f"environment variable and name it with {self.flag('api_key_env')}"
            )

    def replace(self, **changes: Any) -> RemoteSettings:
        """A copy with `changes` (None values: keep this one's), validated."""
        given = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **given) if given else self

    # -- the endpoint and its key -------------------------------------------

    def urls(self, fallback: str | None = None) -> tuple[str, ...]:
        """The endpoint(s): those given, else $OPENAI_BASE_URL, else `fallback` (empty
        when there is none)."""
        url = os.environ.get(OPENAI_URL_ENV) or fallback
        urls = self.base_urls or ((url,) if url else ())
        for url in urls:
            if urlsplit(url).scheme not in ("http", "https"):
                raise UsageError(
                    f"{self.flag('base_url')} must be an http(s) URL, not {redact_url(url)!r}"
                )
        return urls

    def api_key(
        self,
        *,
        missing: str = "{flag}: the environment variable {name} is not set",
        may_be_unset: str | None = OPENAI_KEY_ENV,
    ) -> Secret | None:
        """The key from the environment variable `api_key_env` names: None when no
        variable is named, or when `may_be_unset` (OpenAI's default variable, for
        clients that then assume a local server) is unset; UsageError (`missing`,
        worded with the flag and the variable's name) when a variable the user named
        is unset or empty."""
        name = self.api_key_env
        if name is None:
            return None
        value = os.environ.get(name, "")
        if value:
            return Secret(value)
        if name == may_be_unset:
            return None
        raise UsageError(missing.format(flag=self.flag("api_key_env"), name=name))

    def sdk_key(self, **kwargs: Any) -> Secret:
        """The key for an OpenAI SDK client, which refuses none: the placeholder that
        local servers accept when no key is set."""
        return self.api_key(**kwargs) or Secret(PLACEHOLDER_KEY)

    # -- what the remote-call core reads ------------------------------------

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            backoff_max=self.backoff_max,
            retry_after_max=self.retry_after_max,
        )

    def pacer(self) -> Pacer:
        return Pacer(self.requests_per_minute, self.tokens_per_minute)

    def caller(
        self,
        classify: Classifier,
        *,
        policy: RetryPolicy | None = None,
        stats: RemoteStats | None = None,
        answered: bool = False,
        rng: random.Random | None = None,
    ) -> RemoteCaller:
        """An attempt loop for one batch of work with these settings (`policy`
        overrides the retry policy, say a test's quicker one)."""
        return RemoteCaller(
            classify,
            policy=policy or self.policy(),
            concurrency=self.concurrency,
            timeout=self.timeout,
            pacer=self.pacer(),
            stats=stats,
            answered=answered,
            rng=rng,
        )

    @classmethod
    def bound(cls, name: str) -> float | None:
        """The declared lower bound of setting `name` (for a flag's range)."""
        return next(f for f in dataclasses.fields(cls) if f.name == name).metadata.get("min")


def shown_urls(urls: Sequence[str]) -> str:
    """The endpoint(s) for messages, without credentials."""
    return ", ".join(redact_url(url) for url in urls)


# The clients' declared defaults (why they differ: the module's docstring).
BACKEND: Final = RemoteSettings()
JUDGE: Final = RemoteSettings(concurrency=16, max_retries=6, flag_prefix="--judge-")
# The judge's answer length limit (its request's max_tokens), beside its settings so
# that `--help` states it without importing the grader.
JUDGE_MAX_TOKENS: Final = 512
REWARD_MODEL: Final = RemoteSettings(
    api_key_env=None, concurrency=16, timeout=60.0, max_retries=4, flag_prefix="--reward-"
)
