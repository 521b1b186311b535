"""Per-sample statistics: one row per sample from long-format rollouts.

Definitions follow seed 004 (population variance, best/worst, the four
categories) and seed 002 (the gate: a group of G rollouts is informative only
when its outcomes are mixed). A row with an error is never a score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from curate.stats.estimators import (
    BetaPrior,
    choose_ratio,
    fit_beta_prior,
    gate_open_bernoulli,
    gate_open_unbiased,
    wilson_interval,
)

if TYPE_CHECKING:
    import polars as pl

CATEGORIES = ("always_correct", "always_incorrect", "high_variance", "low_variance")
DEFAULT_THRESHOLD = 0.01
DEFAULT_GROUP_SIZE = 8
# A rollout "passes" when it earns full credit; partial credit counts toward the
# mean and variance, not toward pass@k or the pass rate.
PASS_SCORE = 1.0


def aggregate_rollouts(rollouts: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Group rollouts by sample: counts, sums, extremes (one pass over the rows)."""
    import polars as pl

    score = pl.col("score")
    return (
        rollouts.lazy()
        .group_by("sample_id")
        .agg(
            score.count().cast(pl.Int64).alias("n_rollouts"),
            pl.col("error").is_not_null().sum().cast(pl.Int64).alias("n_errors"),
            (score >= PASS_SCORE).sum().cast(pl.Int64).alias("successes"),
            score.sum().alias("score_sum"),
            (score * score).sum().alias("score_sq_sum"),
            score.max().alias("best_score"),
            score.min().alias("worst_score"),
            ((score > 0) & (score < PASS_SCORE)).sum().cast(pl.Int64).alias("partial"),
        )
        .collect()
    )


def is_binary(aggregated: pl.DataFrame) -> bool:
    """True when every scored rollout is 0 or 1."""
    return int(aggregated["partial"].sum()) == 0


def fit_prior(aggregated: pl.DataFrame) -> BetaPrior:
    """Empirical-Bayes Beta prior on pass rates, fitted on the whole data set."""
    import polars as pl

    hist = (
        aggregated.filter(pl.col("n_rollouts") > 0)
        .group_by("n_rollouts", "successes")
        .len()
        .rows()
    )
    return fit_beta_prior((int(n), float(c), int(w)) for n, c, w in hist)


def sample_stats(
    rollouts: pl.DataFrame | pl.LazyFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    prior: BetaPrior | None = None,
) -> pl.DataFrame:
    """One row per sample with every per-sample statistic curate reports."""
    agg = aggregate_rollouts(rollouts)
    return stats_from_aggregate(
        agg, rollouts, prior=prior or fit_prior(agg), threshold=threshold, group_size=group_size
    )


def stats_from_aggregate(
    agg: pl.DataFrame,
    rollouts: pl.DataFrame | pl.LazyFrame,
    *,
    prior: BetaPrior,
    threshold: float,
    group_size: int,
) -> pl.DataFrame:
    """`sample_stats` on an already aggregated frame (rollouts are read again only
    for partial-credit scores)."""
    import polars as pl

    n = pl.col("n_rollouts")
    has = n > 0
    mean = pl.col("score_sum") / n
    # E[x^2] - E[x]^2, snapped to exactly 0 when every score is the same, so
    # "variance 0" (seed 004's test) never depends on rounding.
    pop_var = (
        pl.when(pl.col("best_score") == pl.col("worst_score"))
        .then(0.0)
        .otherwise((pl.col("score_sq_sum") / n - mean * mean).clip(lower_bound=0.0))
    )
    frame = agg.with_columns(
        pl.when(has).then(mean).alias("mean_score"),
        pl.when(has).then(pop_var).alias("variance"),
        pl.when(n > 1).then(pop_var * n / (n - 1)).alias("variance_unbiased"),
        pl.when(has).then(pl.col("successes") / n).alias("pass_rate"),
    ).with_columns(pl.col("variance").sqrt().alias("std_dev"))

    pairs = _pair_table(frame, prior, group_size)
    frame = frame.join(pairs, on=["n_rollouts", "successes"], how="left")
    if not is_binary(agg):
        frame = frame.drop("gate_open_probability").join(
            _general_gate(rollouts, group_size), on="sample_id", how="left"
        )
    frame = frame.with_columns(category_expr(threshold).alias("category"))
    return frame.select(
        "sample_id",
        "n_rollouts",
        "n_errors",
        "successes",
        "mean_score",
        "variance",
        "variance_unbiased",
        "std_dev",
        "best_score",
        "worst_score",
        "pass_rate",
        "wilson_low",
        "wilson_high",
        "smoothed_pass_rate",
        "gate_open_probability",
        "category",
    )


def category_expr(threshold: float) -> pl.Expr:
    """Seed 004's four categories; samples without a scored rollout get null."""
    import polars as pl

    best, worst, mean, var = (
        pl.col("best_score"),
        pl.col("worst_score"),
        pl.col("mean_score"),
        pl.col("variance"),
    )
    return (
        pl.when(pl.col("n_rollouts") == 0)
        .then(None)
        .when((best == 1.0) & (worst == 1.0))
        .then(pl.lit("always_correct"))
        .when(best == 0.0)
        .then(pl.lit("always_incorrect"))
        .when((var > threshold) & (mean > 0.0) & (mean < 1.0))
        .then(pl.lit("high_variance"))
        .otherwise(pl.lit("low_variance"))
    )


def gate_probability(n: int, c: int, prior: BetaPrior, group_size: int) -> float:
    """P(a training group of `group_size` is mixed) for a binary sample with c of n passes.

    Unbiased from the observed outcomes when n >= G; otherwise u(p) on the
    smoothed pass rate (too few rollouts to draw a group of G from).
    """
    if n >= group_size:
        return gate_open_unbiased(n, c, group_size)
    return gate_open_bernoulli(prior.smooth(c, n), group_size)


def _pair_table(frame: pl.DataFrame, prior: BetaPrior, group_size: int) -> pl.DataFrame:
    """Estimators that depend only on (n, c), computed once per distinct pair."""
    import polars as pl

    rows = []
    for n, c in frame.select("n_rollouts", "successes").unique().rows():
        if n == 0:
            rows.append((n, c, None, None, None, None))
            continue
        lo, hi = wilson_interval(c, n)
        rows.append(
            (n, c, lo, hi, prior.smooth(c, n), gate_probability(n, c, prior, group_size))
        )
    return pl.DataFrame(
        rows,
        schema={
            "n_rollouts": pl.Int64,
            "successes": pl.Int64,
            "wilson_low": pl.Float64,
            "wilson_high": pl.Float64,
            "smoothed_pass_rate": pl.Float64,
            "gate_open_probability": pl.Float64,
        },
        orient="row",
    )


def _general_gate(rollouts: pl.DataFrame | pl.LazyFrame, group_size: int) -> pl.DataFrame:
    """Gate probability for partial-credit scores: P(not all G scores are equal).

    With value counts c_v over n rollouts: 1 - sum_v C(c_v,G)/C(n,G) when n >= G
    (unbiased), else the plug-in 1 - sum_v (c_v/n)^G.
    """
    import polars as pl

    counts = (
        rollouts.lazy()
        .filter(pl.col("score").is_not_null())
        .group_by("sample_id", "score")
        .len()
        .group_by("sample_id")
        .agg(pl.col("len").alias("counts"))
        .collect()
    )
    out = []
    for sid, cs in counts.rows():
        n = int(sum(cs))
        if group_size <= 1:
            out.append((sid, 0.0))
        elif n >= group_size:
            same = sum(choose_ratio(int(c), n, group_size) for c in cs)
            out.append((sid, max(0.0, 1.0 - same)))
        else:
            out.append((sid, max(0.0, 1.0 - sum((c / n) ** group_size for c in cs))))
    return pl.DataFrame(
        out, schema={"sample_id": pl.String, "gate_open_probability": pl.Float64}, orient="row"
    )

