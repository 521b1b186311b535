"""Read a run once and compute on it: `load_aggregated` and `load_analysis`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.deepen import deepening_start
from curate.core.outcome import DEFAULT_THRESHOLD
from curate.errors import InputError
from curate.stats.adaptive import nominal_runs
from curate.stats.analysis import analyze
from curate.stats.multiplicity import MULTIPLICITY
from curate.stats.per_sample import (
    DEFAULT_GROUP_SIZE,
    aggregate_exprs,
    aggregate_fixed_width,
    aggregate_rollouts,
    aggregate_run_blocks,
    binary_aggregate,
    binary_fixed_width_aggregate,
    compress_binary_aggregate,
    count_exprs,
    is_binary,
)
from curate.stats.usage import usage_section
from curate.store.fast_scores import (
    AnyOrder,
    Layout,
    RunMajor,
    SampleMajor,
    ScoreRead,
    read_scores,
)
from curate.store.manifest import RunManifest
from curate.store.scores import load_scores

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.dataset import DatasetSummary
    from curate.stats.mixed import ScoreModel
    from curate.stats.prior import Prior
    from curate.store.run_dir import RolloutStore


@dataclass
class AggregatedScores:
    """Per-sample aggregates (`aggregate_rollouts` of the validated rollouts) and the
    read they came from. `rollouts` is lazy: read again only if a statistic needs rows
    (partial-credit scores). Loaded with `compress=True` and every score 0 or 1,
    `aggregate` is compressed (`compress_binary_aggregate`: a `multiplicity` per row,
    no sample_id). `layout` is how the rows were aggregated (`curate.store.scores`)."""

    source: ScoreRead
    aggregate: pl.DataFrame

    @property
    def path(self) -> Path:
        return self.source.path

    @property
    def rollouts(self) -> pl.LazyFrame:
        return self.source.rollouts

    @property
    def manifest(self) -> RunManifest | None:
        return self.source.manifest

    @property
    def store(self) -> RolloutStore | None:
        return self.source.store

    @property
    def layout(self) -> Layout:
        return self.source.layout

    @property
    def is_run_dir(self) -> bool:
        return self.source.is_run_dir


def load_aggregated(path: str | os.PathLike[str], *, compress: bool = False) -> AggregatedScores:
    """`aggregate_rollouts(load_scores(path).rollouts)`, in one read of a Parquet table
    or run directory (`read_scores`), for callers that need per-sample aggregates only.

    A dense layout is aggregated with fixed-width reductions, any other order in one
    streaming hash group-by with the store's checks riding along; input that trips a
    check is read again by `load_scores`, so errors and duplicate handling are its own.
    The aggregates equal `aggregate_rollouts`' up to row order (and, for partial-credit
    scores, the last bit of sums, which depends on the summation order).

    `compress=True` (for callers that need data-set statistics only) merges samples
    with equal statistics when every score is 0 or 1: a few rows instead of millions.
    """
    read = read_scores(path)
    agg = _aggregate(read.layout, compress)
    if agg is None:  # a check tripped in the group-by: the exact read names it
        read = read.exact()
        agg = _aggregate(read.layout, compress)
        assert agg is not None  # the exact read's layout is always Rows
    if compress and MULTIPLICITY not in agg.columns and is_binary(agg):
        agg = compress_binary_aggregate(agg)
    return AggregatedScores(source=read, aggregate=agg)


def _aggregate(layout: Layout, compress: bool) -> pl.DataFrame | None:
    """Per-sample aggregates of one layout (compressed straight away where the layout
    makes that cheaper); None when an AnyOrder check trips."""
    if isinstance(layout, SampleMajor):
        if compress and layout.binary:
            return binary_fixed_width_aggregate(layout.scores, layout.width)
        return aggregate_fixed_width(layout.ids, layout.scores, layout.width)
    if isinstance(layout, RunMajor):
        return aggregate_run_blocks(layout.ids, layout.runs)
    if isinstance(layout, AnyOrder):
        if compress and layout.binary:  # 0/1 scores: three counts, a third less work
            counts = layout.group(count_exprs())
            return None if counts is None else binary_aggregate(counts)
        return layout.group(aggregate_exprs())
    return aggregate_rollouts(layout.frame)


@dataclass(frozen=True)
class Deepened:
    """A deepened run's per-sample aggregates over every rollout, deepening rows
    included (`curate.core.deepen`): what its pass-rate prior is fitted on; and the
    report's `deepened` section (`section`)."""

    aggregate: pl.DataFrame
    section: dict[str, int]


def deepened_aggregate(read: ScoreRead) -> Deepened | None:
    """`Deepened` for a deepened run; None for any other input (the prior is fitted on
    the per-sample aggregates) and for a run whose scores are not all 0 or 1 (`curate
    eval --deepen` refuses those)."""
    import polars as pl

    start = deepening_start(read.manifest)
    if not read.is_run_dir or start is None:
        return None
    rows = load_scores(read.path, deepening=True).rollouts
    agg = aggregate_rollouts(rows)
    if not is_binary(agg):
        return None
    extra = rows.filter((pl.col("rollout_idx") >= start) & pl.col("error").is_null())
    section = {
        "nominal_runs": start,
        "prompts": extra["sample_id"].n_unique(),
        "rollouts": extra.height,
        "max_rollouts": int(agg.select(pl.col("n_rollouts").max()).item() or 0),
    }
    return Deepened(aggregate=agg, section=section)


@dataclass
class LoadedAnalysis:
    """Everything the analysis commands use, from one read: where the scores came from
    (`source`: path, manifest, the run's samples, token columns), the per-sample
    statistics, the data-set summary, the fitted pass-rate prior and the score model
    every mixed-group figure comes from (`curate.stats.mixed`).

    Loaded with `per_sample=False`, `per_sample` may be compressed (0/1 scores: one row
    per distinct statistics with a `multiplicity`, no sample_id).
    """

    source: ScoreRead
    per_sample: pl.DataFrame
    summary: DatasetSummary
    prior: Prior
    binary: bool
    model: ScoreModel

    @property
    def path(self) -> Path:
        return self.source.path

    @property
    def manifest(self) -> RunManifest | None:
        return self.source.manifest

    @property
    def is_run_dir(self) -> bool:
        return self.source.is_run_dir

    def samples(self) -> pl.DataFrame | None:
        """The run's stored input samples (None for a bare score table)."""
        return self.source.samples()

    def usage(
        self, price_in: float | None = None, price_out: float | None = None
    ) -> dict[str, Any] | None:
        """The report's `usage` section: tokens (and cost, given prices) when the input
        has token counts; None when it has none and no price was given."""
        return usage_section(self.source.tokens(), price_in, price_out)


def load_analysis(
    path: str | os.PathLike[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    per_sample: bool = True,
    group_by: str | None = None,
    require_group: bool = True,
) -> LoadedAnalysis:
    """Read scores once and compute every statistic on them.

    `per_sample=True` (filter, plot, allocate): one row per sample, computed from
    `load_scores`' rows exactly as `analyze` computes them. `per_sample=False` (the
    report: data-set statistics only): the one-scan read of `load_aggregated`, with
    0/1 scores compressed to a few weighted rows.

    `group_by` names a column of the run's samples.parquet (joined on sample_id) or of
    the score table: the summary's `by_group` breakdown. Without it, or when the column
    is missing and `require_group` is False, there is no breakdown.
    """
    read = read_scores(path, fast=not per_sample)
    groups = None
    if group_by is not None:
        groups = read.group_labels(group_by)
        if groups is None and require_group:
            where = "the run's samples.parquet" if read.is_run_dir else "the score table"
            raise InputError(f"no column '{group_by}' to group by in {where}", path=read.path)
    if per_sample:
        agg = _aggregate(read.layout, compress=False)
    else:
        # Grouped: per-sample aggregates first (the labels join on sample_id), then
        # compressed with the group as one more key.
        agg = _aggregate(read.layout, compress=groups is None)
        if agg is None:  # a check tripped in the group-by: the exact read names it
            read = read.exact()
            agg = _aggregate(read.layout, compress=groups is None)
            assert agg is not None
        if groups is not None:
            agg = agg.join(groups, on="sample_id", how="left")
        if MULTIPLICITY not in agg.columns and is_binary(agg):
            agg = compress_binary_aggregate(agg, keys=("group",) if groups is not None else ())
    assert agg is not None
    manifest = read.manifest
    deepened = deepened_aggregate(read)
    analysis = analyze(
        read.rollouts,
        threshold=threshold,
        group_size=group_size,
        adaptive=manifest is not None and manifest.adaptive,
        aggregate=agg,
        errors=read.error_messages(),
        groups=groups if per_sample else None,
        group_by=group_by if groups is not None else None,
        nominal_runs=nominal_runs(manifest),  # adaptive runs: model-based figures at N
        prior_aggregate=deepened.aggregate if deepened is not None else None,
    )
    if deepened is not None:
        analysis.summary.extra["deepened"] = deepened.section
    return LoadedAnalysis(
        source=read,
        per_sample=analysis.per_sample,
        summary=analysis.summary,
        prior=analysis.prior,
        binary=analysis.binary,
        model=analysis.model,
    )
