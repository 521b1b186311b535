"""One evaluation as one value: `Evaluation` holds everything the engine needs to
draw and grade rollouts (an open backend, a grader, prompts and references by sample
id, sampling settings, prompt mode, base seed, run count, chunk size).

Every caller builds one and hands it over: `evaluate` (curate eval) after loading
the data and opening the backend, `run_adaptive` for each of its rounds (the same
value with per-sample run targets), the tests and the benchmarks. The engine entry
points are `run_eval(store, evaluation)` and `run_adaptive(store, evaluation, policy)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curate.core.prompts import Mode, Prompt
from curate.core.reasoning import DEFAULT_TRUNCATION
from curate.core.sampling import SamplingConfig

if TYPE_CHECKING:
    from curate.backends.base import Backend
    from curate.graders import Grader

# Prompts per engine call, and per shard: large enough that the engine batches
# well, small enough that a killed run loses little.
DEFAULT_CHUNK_SIZE = 512


@dataclass(frozen=True)
class Evaluation:
    """What to draw and how to grade it.

    `runs` is one count for every sample (rollout_idx 0..runs-1), or a per-sample target
    (an adaptive round); a sample missing from that mapping draws nothing.
    """

    backend: Backend
    grader: Grader
    prompts: Mapping[str, Prompt]
    references: Mapping[str, Any]
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    mode: Mode = "chat"
    seed: int = 0
    runs: int | Mapping[str, int] = 8
    chunk_size: int = DEFAULT_CHUNK_SIZE
    # How a rollout cut short is scored (curate.core.reasoning.TRUNCATION_POLICIES).
    truncation: str = DEFAULT_TRUNCATION
    # Samples whose reference the pre-run check found unusable: a grader error on one
    # of them recurs on every re-run, so it is stored as settled (curate.core.settled).
    unusable_references: frozenset[str] = frozenset()

    def with_runs(self, runs: int | Mapping[str, int]) -> Evaluation:
        """The same evaluation with another run count (or per-sample targets)."""
        return dataclasses.replace(self, runs=runs)


def evaluation_of(evaluation: Evaluation | None, fields: Mapping[str, Any]) -> Evaluation:
    """`evaluation`, or one built from keyword fields (the engine entry points accept
    `run_eval(store, backend=..., grader=..., ...)` as well as an Evaluation)."""
    if evaluation is None:
        return Evaluation(**fields)
    if fields:
        raise TypeError(f"pass an Evaluation or its fields, not both ({', '.join(fields)})")
    return evaluation
