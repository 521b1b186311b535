"""The real vLLM engine on the bundled tiny model (the CPU build, or the CUDA build on a
GPU machine: tests marked `gpu` run only there)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.backends.base import GenerationRequest, SamplingConfig
from tests.conftest import (
    ARITHMETIC,
    TINY_MODEL,
    VLLM_DEVICE,
    chat_prompts_and_references,
    run_chat_eval,
)

pytestmark = pytest.mark.slow


def test_backend_reports_chat_template(vllm_backend: Any) -> None:
    info = vllm_backend.info()
    assert info.has_chat_template and len(info.chat_template_sha256) == 64
    assert info.extra["device"] == VLLM_DEVICE


def test_full_eval_on_the_real_engine(vllm_backend: Any, tmp_path: Path) -> None:
    prompts, refs = chat_prompts_and_references(ARITHMETIC, 300)
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)
    result, frame = run_chat_eval(
        vllm_backend, tmp_path / "run", prompts, refs, runs=8, sampling=sampling
    )
    assert result.rollouts == 300 * 8 and result.errors == 0
    assert frame.height == 2400
    assert frame.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    assert frame["completion_tokens"].min() >= 1 and frame["prompt_tokens"].min() >= 5
    per = frame.group_by("sample_id").agg(pl.col("score").sum().alias("c"))
    shares = {
        "always_correct": per.filter(pl.col("c") == 8).height / 300,
        "always_wrong": per.filter(pl.col("c") == 0).height / 300,
        "mixed": per.filter((pl.col("c") > 0) & (pl.col("c") < 8)).height / 300,
    }
    # The bundled data is built so the tiny model gives >= 15% in each band.
    assert all(share >= 0.15 for share in shares.values()), shares


def test_runs_of_a_sample_differ_and_same_seed_repeats(vllm_backend: Any) -> None:
    prompts, _ = chat_prompts_and_references(ARITHMETIC, 40)
    reqs = [
        GenerationRequest(sample_id=sid, prompt=p, n=8, first_run=0, seed=1234 + i)
        for i, (sid, p) in enumerate(prompts.items())
    ]
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)
    first = vllm_backend.generate(reqs, sampling, "chat")
    again = vllm_backend.generate(reqs, sampling, "chat")
    texts = [[g.text for g in gens] for gens in first]
    assert texts == [[g.text for g in gens] for gens in again]
    # The engine's global seed must not make all runs of a sample identical.
    assert sum(len(set(t)) > 1 for t in texts) >= 10


def test_truncated_completions_are_flagged_and_graded(vllm_backend: Any, tmp_path: Path) -> None:
    prompts, refs = chat_prompts_and_references(ARITHMETIC, 10)
    sampling = SamplingConfig(temperature=1.0, max_tokens=1)
    _, frame = run_chat_eval(
        vllm_backend, tmp_path / "run", prompts, refs, runs=2, sampling=sampling
    )
    long = frame.filter(pl.col("finish_reason") == "length")
    assert long.height > 0 and long["truncated"].all()
    assert long["score"].null_count() == 0  # graded as they are, not retried or dropped


@pytest.mark.gpu
def test_the_cuda_build_sizes_its_cache_by_a_share_of_gpu_memory() -> None:
    """The GPU path of `open_vllm`: a share of the GPU's memory for the engine
    (--gpu-memory-utilization) instead of a fixed KV-cache size, and the rollouts made
    on the GPU."""
    from curate.backends.vllm_local import open_vllm

    prompts, _ = chat_prompts_and_references(ARITHMETIC, 8)
    reqs = [
        GenerationRequest(sample_id=sid, prompt=p, n=4, first_run=0, seed=i)
        for i, (sid, p) in enumerate(prompts.items())
    ]
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)
    with open_vllm(str(TINY_MODEL), seed=0, gpu_memory_utilization=0.2) as backend:
        assert backend.info().extra["device"] == "gpu"
        out = backend.generate(reqs, sampling, "chat")
    assert [len(gens) for gens in out] == [4] * 8
    assert all(g.error is None for gens in out for g in gens)
