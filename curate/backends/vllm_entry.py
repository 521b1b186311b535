"""`--backend vllm`'s factory: one engine in this process (`vllm_local`), or with
`--ray` K replicas of it on a Ray cluster (`ray_pool`). Imports neither vllm nor ray
until one is chosen."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from curate.backends.base import Backend
from curate.backends.vllm_options import VllmOptions
from curate.errors import MissingExtraError


def open_vllm_backend(
    model: str, options: VllmOptions | None = None, *, seed: int = 0, **given: Any
) -> AbstractContextManager[Backend]:
    """The context manager that starts the engine (or the pool) and yields the backend."""
    opts = options if options is not None else VllmOptions.parse(given)
    if opts.ray is None:
        try:
            from curate.backends.vllm_local import open_vllm
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("curate"):
                raise
            raise MissingExtraError(
                f"the vllm backend needs '{exc.name}', which is not installed: "
                "pip install 'curate[cpu]' (CPU) or 'curate[gpu]' (GPU), or `make setup`"
            ) from exc
        return open_vllm(model, opts, seed=seed)
    from curate.backends.ray_pool import RayPoolOptions, open_ray_pool

    pool = RayPoolOptions(
        address=opts.ray,
        replicas=opts.replicas,
        gpus_per_replica=opts.gpus_per_replica,
        cpus_per_replica=opts.cpus_per_replica,
    )
    return open_ray_pool("vllm", model, opts.local(), pool, seed=seed)
