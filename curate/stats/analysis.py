"""One call from rollouts to everything the report needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from curate.stats.dataset import DatasetSummary, summarize
from curate.stats.estimators import BetaPrior
from curate.stats.per_sample import (
    DEFAULT_GROUP_SIZE,
    DEFAULT_THRESHOLD,
    aggregate_rollouts,
    fit_prior,
    is_binary,
    stats_from_aggregate,
)

if TYPE_CHECKING:
    import polars as pl


@dataclass
class Analysis:
    per_sample: pl.DataFrame
    summary: DatasetSummary
    prior: BetaPrior
    binary: bool


def analyze(
    rollouts: pl.DataFrame | pl.LazyFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    adaptive: bool = False,
    aggregate: pl.DataFrame | None = None,
    nominal_runs: int | None = None,
) -> Analysis:
    """Aggregate once, fit the prior once, then the per-sample and data-set statistics.

    `aggregate` is `aggregate_rollouts(rollouts)` when the caller already has it
    (`curate.analysis` computes it from the store's read); `rollouts` is then read only
    for partial-credit scores. A compressed aggregate (`load_aggregated(compress=True)`)
    gives a compressed `per_sample`: one row per distinct statistics, no sample_id.
    `adaptive` and `nominal_runs` go to `summarize`.
    """
    agg = aggregate_rollouts(rollouts) if aggregate is None else aggregate
    prior = fit_prior(agg)
    binary = is_binary(agg)
    per_sample = stats_from_aggregate(
        agg, rollouts, prior=prior, threshold=threshold, group_size=group_size
    )
    summary = summarize(
        per_sample,
        prior=prior,
        threshold=threshold,
        group_size=group_size,
        binary=binary,
        adaptive=adaptive,
        nominal_runs=nominal_runs,
    )
    return Analysis(per_sample=per_sample, summary=summary, prior=prior, binary=binary)
