"""Statistics: pure functions from polars frames to polars frames (and plain summaries).

Nothing here reads a file: `curate.store` reads, and `curate.analysis` hands what it
read to these functions (per-sample aggregates of each layout the store describes,
then `analyze`).
"""

from curate.core.outcome import CATEGORIES, DEFAULT_THRESHOLD
from curate.stats.analysis import Analysis, analyze
from curate.stats.dataset import (
    DatasetSummary,
    gate_curve,
    pass_at_k_columns,
    pass_at_k_table,
    summarize,
)
from curate.stats.estimators import BetaPrior, fit_beta_prior, pass_at_k
from curate.stats.per_sample import (
    DEFAULT_GROUP_SIZE,
    aggregate_rollouts,
    sample_stats,
)
from curate.stats.prior import GridPrior, Prior, fit_prior_counts

__all__ = [
    "CATEGORIES",
    "DEFAULT_GROUP_SIZE",
    "DEFAULT_THRESHOLD",
    "Analysis",
    "BetaPrior",
    "DatasetSummary",
    "GridPrior",
    "Prior",
    "aggregate_rollouts",
    "analyze",
    "fit_beta_prior",
    "fit_prior_counts",
    "gate_curve",
    "pass_at_k",
    "pass_at_k_columns",
    "pass_at_k_table",
    "sample_stats",
    "summarize",
]
