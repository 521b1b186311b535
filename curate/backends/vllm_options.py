"""The local vLLM engine's options (`--backend vllm`), read by `open_vllm`, the
manifest and `curate eval`'s flags. Importing this module does not import vllm."""

from __future__ import annotations

from dataclasses import dataclass

from curate.backends.options import BackendOptions, option


@dataclass(frozen=True)
class VllmOptions(BackendOptions):
    """How to start `vllm.LLM`; None leaves the choice to the engine (or to curate's
    CPU-build defaults in `curate.backends.vllm_local`)."""

    label = "vLLM"

    tensor_parallel_size: int = option(1, "GPUs per model", min=1)
    max_model_len: int | None = option(None, "context length")
    gpu_memory_utilization: float | None = option(
        None, "memory share for the KV cache (vLLM's default on GPU)"
    )
    kv_cache_memory_gb: float | None = option(
        None, "a fixed KV-cache size in GiB (default on the CPU build: 1)", min=0.01
    )
    dtype: str = option("auto", "weight dtype")
    trust_remote_code: bool = option(False, "allow model code")
