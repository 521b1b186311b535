"""Backends by name: each one a factory and an option schema, both in the ground
floor's `Registry` shape and imported only when chosen (so `curate --help` never
loads vllm or torch; the schemas are light and the CLI reads them for its flags).

Other packages add backends through the ``curate.backends`` entry-point group: the
entry point names the factory, and the factory's `options` attribute (a
`BackendOptions` subclass) its schema; without one the backend takes no options."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from curate.backends.base import Backend
from curate.backends.options import BackendOptions
from curate.core.registry import Registry
from curate.errors import UsageError

# A factory takes the model, the validated options and the run's seed, and returns a
# context manager that yields a ready Backend and closes it on exit.
BackendFactory = Callable[..., AbstractContextManager[Backend]]


def _unknown(name: str, names: list[str]) -> str:
    return f"unknown backend '{name}' (choose from {', '.join(sorted(names))})"


BACKENDS: Registry[BackendFactory] = Registry("backend", unknown=_unknown, group="curate.backends")
BACKEND_OPTIONS: Registry[type[BackendOptions]] = Registry("backend", unknown=_unknown)


def _add(name: str, factory: str, options: str, *, help: str, install_hint: str = "") -> None:
    BACKENDS.add(name, factory, help=help, install_hint=install_hint)
    BACKEND_OPTIONS.add(name, options, help=help)


_add(
    "vllm",
    "curate.backends.vllm_entry:open_vllm_backend",
    "curate.backends.vllm_options:VllmOptions",
    help="a local vLLM engine (the CPU build or CUDA)",
    install_hint="pip install 'curate[cpu]' (CPU) or 'curate[gpu]' (GPU), or `make setup`",
)
_add(
    "openai",
    "curate.backends.openai_api:open_openai",
    "curate.backends.openai_options:OpenAIOptions",
    help="any OpenAI-compatible endpoint",
    install_hint="pip install 'curate[openai]'",
)
_add(
    "fake",
    "curate.backends.fake:open_fake",
    "curate.backends.fake:FakeOptions",
    help="deterministic answers, for tests",
)


def backend_factory(name: str) -> BackendFactory:
    return BACKENDS.get(name)


def options_schema(name: str) -> type[BackendOptions]:
    """The option schema of backend `name` (a plugin's rides on its factory)."""
    if name in BACKEND_OPTIONS:
        return BACKEND_OPTIONS.get(name)
    factory = BACKENDS.get(name)  # a plugin's (or an unknown name: the one-line error)
    schema = getattr(factory, "options", None)
    if isinstance(schema, type) and issubclass(schema, BackendOptions):
        return schema
    if schema is not None:
        raise UsageError(
            f"backend '{name}': its factory's `options` is not a BackendOptions subclass"
        )
    return _no_options(BACKENDS.entry(name).name)


@functools.cache
def _no_options(name: str) -> type[BackendOptions]:
    """The schema of a backend that declares no options."""
    schema = type(f"{name}Options", (BackendOptions,), {"label": name})
    return dataclasses.dataclass(frozen=True)(schema)


def backend_options(
    name: str, values: Mapping[str, Any] | BackendOptions | None = None
) -> BackendOptions:
    """The validated options of backend `name` from a mapping (or the object itself)."""
    return options_schema(name).parse(values)


def open_backend(
    name: str,
    model: str,
    options: Mapping[str, Any] | BackendOptions | None = None,
    *,
    seed: int = 0,
) -> AbstractContextManager[Backend]:
    """A context manager yielding a ready backend (the engine starts on enter)."""
    return backend_factory(name)(model, backend_options(name, options), seed=seed)
