"""`plan_rollouts`: a rollout plan for a run or score table, out of a total budget (the
library call behind `curate allocate`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.allocation.plan import (
    DEFAULT_MIN_RUNS,
    DEFAULT_ZERO_SIGNAL,
    allocate,
    variance_proxy,
)
from curate.errors import UsageError
from curate.store.tables import table_format, write_table

if TYPE_CHECKING:
    import polars as pl


@dataclass
class RolloutPlan:
    """The plan (`allocate`'s frame) and what `curate allocate` says about it."""

    frame: pl.DataFrame
    budget: int
    method: str
    zero_signal: str
    scored_samples: int  # samples in the run, before "drop" left any out

    @property
    def left_out(self) -> int:
        """Samples the plan leaves out (zero signal, with zero_signal="drop")."""
        return self.scored_samples - self.frame.height

    @property
    def at_minimum(self) -> int:
        """Zero-signal samples held at the minimum (zero_signal="min")."""
        return int(self.frame["zero_signal"].sum()) if self.zero_signal == "min" else 0

    @property
    def even_share(self) -> float:
        """Rollouts per sample if the budget were spread evenly."""
        return self.budget / self.frame.height

    def variance_ratio(self) -> float:
        """The plan's gradient-variance proxy sum sigma~^2/n (DynaMO's yardstick: p~(1-p~)
        on 0/1 scores, the shrunk reward variance on continuous ones) over that of
        spreading the same budget evenly over the same samples: below 1 is better than
        uniform."""
        import numpy as np

        counts = self.frame["planned_rollouts"].to_numpy()
        sigma2 = (self.frame["reward_std"] ** 2).to_numpy()
        even = np.full(self.frame.height, self.even_share)
        return variance_proxy(sigma2, counts) / max(variance_proxy(sigma2, even), 1e-300)


def plan_rollouts(
    run: str | os.PathLike[str],
    budget: int,
    *,
    output: str | os.PathLike[str] | None = None,
    method: str = "neyman",
    min_runs: int = DEFAULT_MIN_RUNS,
    max_runs: int | None = None,
    zero_signal: str = DEFAULT_ZERO_SIGNAL,
) -> RolloutPlan:
    """Plan rollouts per sample for training from `run`'s pass rates (DynaMO's
    variance-minimising allocation, Reinforce-Ada's inverse-p weight or uniform; see
    `curate.allocation.plan`), and write the plan to `output` when given
    (.jsonl, .parquet or .csv). Bad options fail before anything is read."""
    from curate.analysis import load_analysis

    if output is not None:
        table_format(output)  # an unknown suffix fails before any work
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 (got {budget})")
    if min_runs < 0:
        raise UsageError(f"--min-rollouts must be at least 0 (got {min_runs})")
    loaded = load_analysis(run)
    frame = allocate(
        loaded.per_sample,
        budget,
        method=method,
        min_runs=min_runs,
        max_runs=max_runs,
        zero_signal=zero_signal,
        prior=loaded.prior,
    )
    if output is not None:
        write_table(frame, Path(output))
    return RolloutPlan(
        frame=frame,
        budget=budget,
        method=method,
        zero_signal=zero_signal,
        scored_samples=loaded.per_sample.height,
    )
