"""Names of the per-sample statistics columns that leave curate: the ones every export
carries beside a sample's original fields (`curate filter`), named and meaning as in
`curate report`. Below filtering and exports, so that both read one list."""

from __future__ import annotations

from typing import Final

# Statistics carried into every export beside the original fields.
STAT_COLUMNS: Final[tuple[str, ...]] = (
    "n_rollouts",
    "pass_rate",
    "mean_score",
    "variance",
    "smoothed_pass_rate",
    "category",
)
