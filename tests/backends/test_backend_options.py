"""`NAME=VALUE` option assignments (`curate eval --option`), read by a backend's schema.

The class: every option of every registered backend's schema, its value written as a
user would type it, must read back as the value itself; and every kind of bad
assignment is one line naming it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from curate.backends.options import BackendOptions
from curate.backends.registry import BACKEND_OPTIONS, backend_options, options_schema
from curate.errors import UsageError

# A value of each option that differs from its default, for the options whose
# default is None (nothing to write back).
SAMPLES: dict[str, Any] = {
    "max_model_len": 2048,
    "gpu_memory_utilization": 0.5,
    "kv_cache_memory_gb": 1.5,
    "reasoning_parser": "deepseek_r1",
    "ray": "auto",
    "gpus_per_replica": 0.5,
    "cpus_per_replica": 2.0,
    "base_url": "http://127.0.0.1:8000/v1",
    "requests_per_minute": 60.0,
    "tokens_per_minute": 1000.0,
    "answers": {"What is 1 + 1?": ["2", 0.5]},
    "delay_s": 0.25,
    "completion_chars": (10, 20),
}
# Options that need another one set beside them (the schema's own cross-checks).
NEEDS: dict[str, dict[str, Any]] = {
    "gpus_per_replica": {"ray": "auto"},
    "cpus_per_replica": {"ray": "auto"},
}


def typed(value: Any) -> str:
    """`value` as a user types it after NAME=."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list | tuple):
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return str(value)


def every_option() -> list[tuple[str, str]]:
    return [
        (backend, f.name)
        for backend in BACKEND_OPTIONS.names()
        for f in BACKEND_OPTIONS.get(backend).schema()
    ]


@pytest.mark.parametrize(("backend", "name"), every_option())
def test_every_option_of_every_backend_reads_back(backend: str, name: str) -> None:
    schema = options_schema(backend)
    default = schema._field(name).default
    value = SAMPLES.get(name, default) if default is None else default
    if isinstance(value, bool):
        value = not value
    elif name in SAMPLES:
        value = SAMPLES[name]
    assert value is not None, f"add a sample value for {backend}'s {name}"
    for spelling in (name, name.replace("_", "-")):
        values = schema.assignments([f"{spelling}={typed(value)}"], backend=backend)
        assert values == {name: value}
        options = backend_options(backend, {**values, **NEEDS.get(name, {})})
        assert getattr(options, name) == value
        assert name in options.given  # recorded in the manifest as set by the user


@pytest.mark.parametrize(
    ("pair", "needle"),
    [
        ("concurrncy=4", "did you mean concurrency?"),
        ("colour=red", "choose from base_url, api_key_env"),
        ("concurrency", "expected NAME=VALUE"),
        ("=4", "expected NAME=VALUE"),
        ("concurrency=four", "expected a whole number"),
        ("timeout=soon", "expected a number"),
        ("requests_per_minute=none", ""),  # an option that may be None takes none
    ],
)
def test_bad_assignments_are_one_line(pair: str, needle: str) -> None:
    schema = options_schema("openai")
    if not needle:
        assert schema.assignments([pair], backend="openai") == {"requests_per_minute": None}
        return
    with pytest.raises(UsageError, match=needle.replace("?", r"\?").replace("(", r"\(")):
        schema.assignments([pair], backend="openai")


def test_ranges_names_and_twice() -> None:
    schema = options_schema("vllm")
    with pytest.raises(UsageError, match="true or false"):
        schema.assignments(["trust_remote_code=maybe"], backend="vllm")
    with pytest.raises(UsageError, match="given twice"):
        schema.assignments(["dtype=float32", "dtype=bfloat16"], backend="vllm")
    with pytest.raises(UsageError, match="JSON"):
        options_schema("fake").assignments(["completion_chars=(1,2)"], backend="fake")
    # The range is the schema's, checked once the values are parsed.
    values = schema.assignments(["replicas=0"], backend="vllm")
    with pytest.raises(UsageError, match="--replicas must be at least 1"):
        backend_options("vllm", values)


def test_a_schema_without_options_names_none() -> None:
    @pytest.importorskip("dataclasses").dataclass(frozen=True)
    class Bare(BackendOptions):
        label = "bare"

    with pytest.raises(UsageError, match="none: it takes no options"):
        Bare.assignments(["x=1"], backend="bare")
