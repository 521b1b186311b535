"""Backends by name, imported only when chosen (so `curate --help` never loads vllm or torch)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from curate.backends.base import Backend
from curate.core.registry import Registry

# A factory takes the model and options and returns a context manager that yields a
# ready Backend and closes it on exit.
BackendFactory = Callable[..., AbstractContextManager[Backend]]

BACKENDS: Registry[BackendFactory] = Registry(
    "backend",
    unknown=lambda name, names: (
        f"unknown backend '{name}' (choose from {', '.join(sorted(names))})"
    ),
)
BACKENDS.add(
    "vllm",
    "curate.backends.vllm_local:open_vllm",
    help="a local vLLM engine (the CPU build or CUDA)",
    install_hint="pip install 'curate[cpu]' (CPU) or 'curate[gpu]' (GPU), or `make setup`",
)
BACKENDS.add(
    "openai",
    "curate.backends.openai_api:open_openai",
    help="any OpenAI-compatible endpoint",
    install_hint="pip install 'curate[openai]'",
)
BACKENDS.add("fake", "curate.backends.fake:open_fake", help="deterministic answers, for tests")


def backend_factory(name: str) -> BackendFactory:
    return BACKENDS.get(name)


def open_backend(name: str, model: str, **options: Any) -> AbstractContextManager[Backend]:
    """A context manager yielding a ready backend (the engine starts on enter)."""
    return backend_factory(name)(model, **options)
