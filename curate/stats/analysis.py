"""One call from rollouts to everything the report needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from curate.stats.dataset import DatasetSummary, summarize, top_errors
from curate.stats.mixed import ScoreModel, fit_score_model
from curate.stats.per_sample import (
    DEFAULT_GROUP_SIZE,
    DEFAULT_THRESHOLD,
    GROUP,
    aggregate_rollouts,
    fit_prior,
    is_binary,
    stats_from_aggregate,
)

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.prior import Prior


@dataclass
class Analysis:
    """The per-sample frame, the data-set summary, the pass-rate prior, whether every
    score is 0 or 1, and the score model every mixed-group figure comes from."""

    per_sample: pl.DataFrame
    summary: DatasetSummary
    prior: Prior
    binary: bool
    model: ScoreModel


def analyze(
    rollouts: pl.DataFrame | pl.LazyFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    adaptive: bool = False,
    aggregate: pl.DataFrame | None = None,
    errors: pl.Series | None = None,
    groups: pl.DataFrame | None = None,
    group_by: str | None = None,
    nominal_runs: int | None = None,
    prior_aggregate: pl.DataFrame | None = None,
) -> Analysis:
    """Aggregate once, fit the priors once, then the per-sample and data-set statistics.

    `aggregate` is `aggregate_rollouts(rollouts)` when the caller already has it
    (`curate.analysis` computes it from the store's read); `rollouts` is then read only
    for partial-credit scores and, when some rollouts failed and `errors` (their
    messages) is not given, for the error messages. A compressed aggregate
    (`load_aggregated(compress=True)`) gives a compressed `per_sample`: one row per
    distinct statistics, no sample_id.

    `groups` (sample_id, group: a sample's value of the column `group_by`) gives the
    summary's `by_group` breakdown; an aggregate may carry the `group` column already.
    `adaptive` and `nominal_runs` go to `summarize`.

    `prior_aggregate` (a deepened run: every rollout, deepening rows included, per
    sample) is what the pass-rate prior is fitted on; the per-sample statistics stay
    those of `aggregate` (the first N rollouts). Without it the prior is fitted on
    `aggregate`.
    """
    import polars as pl

    agg = aggregate_rollouts(rollouts) if aggregate is None else aggregate
    if groups is not None:
        agg = agg.drop(GROUP, strict=False).join(
            groups.select("sample_id", GROUP), on="sample_id", how="left"
        )
    prior = fit_prior(agg if prior_aggregate is None else prior_aggregate)
    binary = is_binary(agg)
    model = ScoreModel.binary(prior) if binary else fit_score_model(rollouts)
    per_sample = stats_from_aggregate(
        agg, rollouts, prior=prior, threshold=threshold, group_size=group_size, model=model
    )
    summary = summarize(
        per_sample,
        prior=prior,
        threshold=threshold,
        group_size=group_size,
        binary=binary,
        adaptive=adaptive,
        model=model,
        nominal_runs=nominal_runs,
    )
    if summary.errors and errors is None:
        errors = (
            rollouts.lazy().select("error").filter(pl.col("error").is_not_null()).collect()["error"]
        )
    summary.top_errors = top_errors(errors)
    if GROUP in per_sample.columns:
        summary.group_by = group_by or GROUP
    return Analysis(per_sample=per_sample, summary=summary, prior=prior, binary=binary, model=model)
