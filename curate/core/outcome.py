"""The outcome rule: which samples can teach a GRPO-style trainer anything.

One rule, one set of names, in two forms: scalar (`outcome_of`, `category_of`) for
code that sees one sample at a time (adaptive evaluation, the progress line), and
polars expressions (`outcome_expr`, `category_expr`) for frames (statistics, plots,
filter, exports). Every label a user reads comes from `LABELS` or `SHORT_LABELS`.

Outcomes (three, exact at a sample's rollout count): every rollout earned full
credit, none earned any credit, or anything else ("mixed").
Categories (four, the variance method's): always correct, always incorrect, and a
mixed sample split by its score variance against a threshold into high variance
(learnable) and low variance.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    import polars as pl

# A rollout "passes" when it earns full credit; partial credit counts toward the
# mean and variance, not toward pass@k or the pass rate.
PASS_SCORE: Final = 1.0
# Variances come from sums of squares and carry ~1e-16 of rounding: a variance this
# close to the threshold counts as equal to it (so not "above" it), e.g. [0.4, 0.6].
VARIANCE_TOLERANCE: Final = 1e-12
DEFAULT_THRESHOLD: Final = 0.01
# The training group size G the gate (mixed-group) odds are quoted at by default.
DEFAULT_GROUP_SIZE: Final = 8

Outcome = Literal["always_correct", "always_incorrect", "mixed"]
Category = Literal["always_correct", "always_incorrect", "high_variance", "low_variance"]

OUTCOMES: Final[tuple[Outcome, ...]] = ("always_correct", "always_incorrect", "mixed")
CATEGORIES: Final[tuple[Category, ...]] = (
    "always_correct",
    "always_incorrect",
    "high_variance",
    "low_variance",
)
# The categories an outcome of "mixed" splits into.
MIXED_CATEGORIES: Final[tuple[Category, ...]] = ("high_variance", "low_variance")

# What a user reads, everywhere (table, Markdown, plots, progress line).
LABELS: Final[dict[str, str]] = {
    "always_correct": "always correct",
    "always_incorrect": "always incorrect",
    "mixed": "mixed",
    "high_variance": "high variance",
    "low_variance": "low variance",
}
# The same words cut to fit a narrow plot band or an 80-column progress bar.
SHORT_LABELS: Final[dict[str, str]] = {
    "always_correct": "correct",
    "always_incorrect": "incorrect",
    "mixed": "mixed",
    "high_variance": "high var",
    "low_variance": "low var",
}


def outcome_of(n: int, successes: int, best: float | None) -> Outcome | None:
    """The outcome of a sample with `n` scored rollouts, `successes` of them passing and
    best score `best`; None without a scored rollout."""
    if n <= 0:
        return None
    if successes >= n:
        return "always_correct"
    if best is None or best <= 0.0:
        return "always_incorrect"
    return "mixed"


def outcome_of_scores(scores: Iterable[float]) -> Outcome | None:
    """`outcome_of` for a list of scores."""
    values = list(scores)
    if not values:
        return None
    return outcome_of(len(values), sum(s >= PASS_SCORE for s in values), max(values))


def category_of(
    n: int,
    successes: int,
    best: float | None,
    mean: float | None,
    variance: float | None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Category | None:
    """The category of one sample (population variance of its scores); None without a
    scored rollout."""
    outcome = outcome_of(n, successes, best)
    if outcome is None or outcome != "mixed":
        return outcome
    assert mean is not None and variance is not None
    if variance > threshold + VARIANCE_TOLERANCE and 0.0 < mean < 1.0:
        return "high_variance"
    return "low_variance"


def _outcome_code(
    n: str | None, best: str, worst: str | None, variance: str | None, mixed: pl.Expr | int
) -> pl.Expr:
    """0 (always correct), 1 (always incorrect), `mixed`, or null without a score.
    Without a `worst` column, "every rollout passed" is "best passed and no spread"."""
    import polars as pl

    top = pl.col(best)
    if worst is not None:
        all_pass = (top >= PASS_SCORE) & (pl.col(worst) >= PASS_SCORE)
    else:
        assert variance is not None
        spread = pl.col(variance).cast(pl.Float64).fill_nan(None).fill_null(0.0)
        all_pass = (top >= PASS_SCORE) & (spread <= VARIANCE_TOLERANCE)
    code = pl.when(all_pass).then(0).when(top <= 0.0).then(1).otherwise(mixed)
    if n is None:
        return code
    return pl.when(pl.col(n) == 0).then(None).otherwise(code)


def outcome_expr(
    *, n: str | None = "n_rollouts", best: str = "best_score", worst: str = "worst_score"
) -> pl.Expr:
    """`outcome_of` over the columns of per-sample statistics; null without a score."""
    import polars as pl

    code = _outcome_code(n, best, worst, None, 2)
    return pl.lit(pl.Series(OUTCOMES, dtype=pl.String)).gather(code)


def category_expr(
    threshold: float = DEFAULT_THRESHOLD,
    *,
    n: str | None = "n_rollouts",
    best: str = "best_score",
    worst: str | None = "worst_score",
    mean: str = "mean_score",
    variance: str = "variance",
) -> pl.Expr:
    """`category_of` over the columns of per-sample statistics; null without a score.
    `n=None` for frames of scored samples only; `worst=None` when the frame has none."""
    import polars as pl

    var, avg = pl.col(variance).cast(pl.Float64).fill_nan(None).fill_null(0.0), pl.col(mean)
    high = (var > threshold + VARIANCE_TOLERANCE) & (avg > 0.0) & (avg < 1.0)
    mixed = pl.when(high).then(2).otherwise(3)
    # The branch picks an index into CATEGORIES and the names are gathered once at the
    # end: choosing among string literals row by row costs ~10x more on a million rows.
    code = _outcome_code(n, best, worst, variance, mixed)
    return pl.lit(pl.Series(CATEGORIES, dtype=pl.String)).gather(code)
