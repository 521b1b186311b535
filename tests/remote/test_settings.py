"""The remote settings every HTTP client shares: declared once, validated once, with
each client's flags named in its messages, and one rule for the endpoint and the key.

The class: every bounded setting of every client (the OpenAI backend, the judge, the
reward model), each built the way its own configuration builds it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest

from curate.backends.openai_options import OpenAIOptions
from curate.errors import UsageError
from curate.graders.judge import JudgeConfig
from curate.graders.reward_model import RewardModelConfig
from curate.remote import RetryPolicy
from curate.remote.settings import (
    BACKEND,
    JUDGE,
    OPENAI_KEY_ENV,
    OPENAI_URL_ENV,
    REWARD_MODEL,
    RemoteSettings,
)

# Each client's configuration, built from the settings it lets a user change, and the
# prefix of its flags.
Builder = Callable[..., Any]
CLIENTS: dict[str, tuple[Builder, RemoteSettings, str]] = {
    "backend": (lambda **kw: OpenAIOptions(**kw), BACKEND, "--"),
    "judge": (lambda **kw: JudgeConfig(model="m", **kw), JUDGE, "--judge-"),
    "reward model": (
        lambda **kw: RewardModelConfig("http://127.0.0.1:1", **kw),
        REWARD_MODEL,
        "--reward-",
    ),
}
SHARED = ("concurrency", "timeout", "max_retries")


def remote_of(config: Any) -> RemoteSettings:
    remote = config.remote
    assert isinstance(remote, RemoteSettings)
    return remote


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_embeds_its_declared_defaults(client: str) -> None:
    build, declared, _ = CLIENTS[client]
    config = build()
    remote = remote_of(config)
    for name in SHARED:
        assert getattr(config, name) == getattr(declared, name) == getattr(remote, name)
    assert remote.policy().max_retries == declared.max_retries
    assert remote.caller(lambda exc: None).limiter.limit == declared.concurrency


def test_the_differing_defaults_are_the_declared_ones() -> None:
    # Why they differ is said in curate/remote/settings.py; this pins what they are.
    assert (BACKEND.concurrency, BACKEND.timeout, BACKEND.max_retries) == (32, 120.0, 8)
    assert (JUDGE.concurrency, JUDGE.timeout, JUDGE.max_retries) == (16, 120.0, 6)
    assert (REWARD_MODEL.concurrency, REWARD_MODEL.timeout, REWARD_MODEL.max_retries) == (
        16,
        60.0,
        4,
    )
    # The retry numbers are the retry policy's own defaults, not a copy.
    policy = RetryPolicy()
    assert BACKEND.policy() == policy
    assert REWARD_MODEL.api_key_env is None and JUDGE.api_key_env == OPENAI_KEY_ENV


def bounded() -> list[tuple[str, str, float]]:
    fields = [f for f in dataclasses.fields(RemoteSettings) if f.metadata.get("min") is not None]
    return [(client, f.name, f.metadata["min"]) for client in CLIENTS for f in fields]


def takes(client: str, name: str) -> bool:
    """Whether the client's configuration has a field for setting `name`."""
    return name in (OpenAIOptions.names() if client == "backend" else SHARED)


@pytest.mark.parametrize(("client", "name", "low"), bounded())
def test_every_bound_names_the_clients_flag(client: str, name: str, low: float) -> None:
    build, _, prefix = CLIENTS[client]
    flag = prefix + name.replace("_", "-")
    for bad in (low - 1 if low >= 1 else -0.5, math.nan):
        with pytest.raises(UsageError, match=f"^{flag} must be at least {low:g}, not"):
            if takes(client, name):
                build(**{name: bad})
            else:  # set through the settings the client embeds
                dataclasses.replace(remote_of(build()), **{name: bad})
    with pytest.raises(UsageError, match=f"^{flag} must be a finite number, not inf"):
        if takes(client, name):
            build(**{name: math.inf})
        else:
            dataclasses.replace(remote_of(build()), **{name: math.inf})
    if takes(client, name):
        assert getattr(remote_of(build(**{name: low})), name) == low  # the bound is in


def test_endpoint_given_then_environment_then_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OPENAI_URL_ENV, raising=False)
    assert BACKEND.urls() == ()
    assert BACKEND.urls(fallback="https://api.example/v1") == ("https://api.example/v1",)
    monkeypatch.setenv(OPENAI_URL_ENV, "http://127.0.0.1:8000/v1")
    assert BACKEND.urls(fallback="https://api.example/v1") == ("http://127.0.0.1:8000/v1",)
    given = BACKEND.replace(base_urls=("http://a:1/v1", "http://b:1/v1"))
    assert given.urls() == ("http://a:1/v1", "http://b:1/v1")
    monkeypatch.setenv(OPENAI_URL_ENV, "ftp://nope")
    with pytest.raises(UsageError, match=r"^--judge-base-url must be an http"):
        JUDGE.urls()


@pytest.mark.parametrize("prefix", ["--", "--judge-", "--reward-"])
def test_urls_with_passwords_twice_or_keys_for_names_are_refused(prefix: str) -> None:
    settings = dataclasses.replace(BACKEND, flag_prefix=prefix)
    with pytest.raises(UsageError, match=f"^{prefix}base-url must not carry a password") as err:
        dataclasses.replace(settings, base_urls=("http://user:hunter22@host/v1",))
    assert "hunter22" not in str(err.value)
    with pytest.raises(UsageError, match=f"^{prefix}base-url: the same URL is given twice"):
        dataclasses.replace(settings, base_urls=("http://h/v1", "http://h/v1"))
    with pytest.raises(UsageError, match=f"^{prefix}api-key-env takes the NAME") as err:
        dataclasses.replace(settings, api_key_env="sk-live-0123456789")
    assert "sk-live" not in str(err.value)


def test_one_rule_for_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OPENAI_KEY_ENV, raising=False)
    monkeypatch.delenv("CURATE_TEST_SETTINGS_KEY", raising=False)
    # OpenAI's default variable unset: no key (a local server), the SDK's placeholder.
    assert BACKEND.api_key() is None
    assert BACKEND.sdk_key().reveal() == "EMPTY"
    # A variable the user named must be set, whichever client names it.
    named = BACKEND.replace(api_key_env="CURATE_TEST_SETTINGS_KEY")
    with pytest.raises(UsageError, match=r"^--api-key-env: the environment variable"):
        named.api_key()
    with pytest.raises(UsageError, match=r"^--reward-api-key-env CURATE_TEST_SETTINGS_KEY: the"):
        RewardModelConfig("http://h:1", api_key_env="CURATE_TEST_SETTINGS_KEY").secret()
    # Even OpenAI's variable, when the reward model is told to read it.
    with pytest.raises(UsageError, match="--reward-api-key-env OPENAI_API_KEY"):
        RewardModelConfig("http://h:1", api_key_env=OPENAI_KEY_ENV).secret()
    assert RewardModelConfig("http://h:1").secret() is None  # no key unless named
    monkeypatch.setenv("CURATE_TEST_SETTINGS_KEY", "sk-test-abcdef")
    key = named.api_key()
    assert key is not None and key.reveal() == "sk-test-abcdef"
    assert "sk-test" not in repr(named) + repr(key)
