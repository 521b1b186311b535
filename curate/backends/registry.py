"""Backends by name, imported only when chosen (so `curate --help` never loads vllm or torch)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from curate.backends.base import Backend
from curate.errors import MissingExtraError, UsageError

# name -> (module, factory, pip hint). A factory takes the model and options and
# returns a context manager that yields a ready Backend and closes it on exit.
BACKENDS: dict[str, tuple[str, str, str]] = {
    "vllm": (
        "curate.backends.vllm_local",
        "open_vllm",
        "pip install 'curate[cpu]' (CPU) or 'curate[gpu]' (GPU), or `make setup`",
    ),
    "openai": ("curate.backends.openai_api", "open_openai", "pip install 'curate[openai]'"),
    "fake": ("curate.backends.fake", "open_fake", ""),
}

BackendFactory = Callable[..., AbstractContextManager[Backend]]


def backend_factory(name: str) -> BackendFactory:
    try:
        module_name, attr, hint = BACKENDS[name]
    except KeyError:
        raise UsageError(
            f"unknown backend '{name}' (choose from {', '.join(sorted(BACKENDS))})"
        ) from None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or "a dependency"
        raise MissingExtraError(
            f"the {name} backend needs '{missing}', which is not installed: {hint}"
        ) from exc
    factory: BackendFactory = getattr(module, attr)
    return factory


def open_backend(name: str, model: str, **options: Any) -> AbstractContextManager[Backend]:
    """A context manager yielding a ready backend (the engine starts on enter)."""
    return backend_factory(name)(model, **options)
