"""Shared fixtures: the real vLLM engine on the bundled tiny model, one per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ROOT / "sample_data" / "tiny-math"

# The JSON report's stable contract (issue 2, README): keys may be added, never removed.
JSON_CONTRACT_KEYS = frozenset(
    {
        "samples",
        "rollouts",
        "errors",
        "mean_score",
        "best_of_n",
        "potential_gain",
        "relative_gain",
        "high_variance_fraction",
        "threshold",
        "categories",
        "pass_at_k",
        "gate",
        "compute_multiplier",
        "warnings",
    }
)
ARITHMETIC = ROOT / "sample_data" / "arithmetic.jsonl"
# Small KV cache: the session engine and a subprocess engine may run side by side.
TEST_ENGINE_OPTIONS = {"kv_cache_memory_gb": 0.25}


@pytest.fixture(scope="session")
def vllm_backend() -> Iterator[object]:
    pytest.importorskip("vllm")
    from curate.backends.vllm_local import open_vllm

    with open_vllm(str(TINY_MODEL), seed=0, **TEST_ENGINE_OPTIONS) as backend:
        yield backend
