"""Names of the columns curate adds to the samples it hands on (`curate filter`): the
per-sample statistics every export carries beside a sample's original fields (named and
meaning as in `curate report`), and the weight, difficulty and copies columns. Below
filtering, exports and the CLI, so that each reads one definition."""

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
# A sample's weight: in an export (unless --weight-column names another) and in a
# weight table given to --weights (with sample_id).
WEIGHT_COLUMN: Final = "weight"
# --difficulty column: easy, medium or hard (unless --difficulty-column names another).
DIFFICULTY_COLUMN: Final = "difficulty"
# --as-frequency: how many times a sample is repeated.
COPIES_COLUMN: Final = "copies"
