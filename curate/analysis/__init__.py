"""The analysis layer: read scores once (`curate.store`), compute on them
(`curate.stats`), and hand every analysis command the same result.

    curate.store     reads and validates; describes the layout of the rows
    curate.stats     pure statistics on frames and series
    curate.analysis  composes the two: `load_analysis` (per-sample frame, data-set
                     summary, prior, the run's samples and token usage) and
                     `load_aggregated` (per-sample aggregates only)

The library calls of the commands build on it: `curate.report.build_report`,
`curate.plots.plot_run`, `curate.filtering.filter_run`,
`curate.allocation.plan_rollouts`.
"""

from curate.analysis.load import AggregatedScores, LoadedAnalysis, load_aggregated, load_analysis

__all__ = ["AggregatedScores", "LoadedAnalysis", "load_aggregated", "load_analysis"]
