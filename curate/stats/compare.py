"""Comparing two runs of the same samples: per-sample tests of change, outcome
transitions, and the named sets (learned, forgotten, newly learnable, still unreachable).

Pure functions of polars frames. The per-sample frames are `stats_from_aggregate`'s
(one row per sample: n_rollouts, successes, pass_rate, wilson_low/high, mean_score,
best_score, worst_score, ...); the two runs are matched on sample_id.

The test of change for 0/1 scores is Fisher's exact test on the 2x2 table (passes and
failures in run A against run B), two-sided, written here from log-gamma hypergeometric
terms. For partial credit it is the Mann-Whitney U test on the two runs' rollout scores,
normal approximation with tie correction and continuity correction.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from curate.core.outcome import SHORT_LABELS, outcome_expr

if TYPE_CHECKING:
    import polars as pl

DEFAULT_ALPHA: Final = 0.05
# Two hypergeometric terms this close (relative) count as equally likely: the two-sided
# p-value sums every table at most as likely as the observed one, and rounding in the
# log-gamma sums must not split ties between mirror-image tables.
_RELATIVE_TIE: Final = 1e-7

# The named sets, as JSON keys and `--keep` names (dashes there).
SETS: Final[tuple[str, ...]] = ("learned", "forgotten", "newly_learnable", "still_unreachable")
SET_LABELS: Final[dict[str, str]] = {
    "learned": "learned",
    "forgotten": "forgotten",
    "newly_learnable": "newly learnable",
    "still_unreachable": "still unreachable",
}
# What each set means, in one line (table footnotes, README, --help).
SET_DEFINITIONS: Final[dict[str, str]] = {
    "learned": "pass rate rose, significant at alpha",
    "forgotten": "pass rate fell, significant at alpha",
    "newly_learnable": "always incorrect before, rewards that differ after",
    "still_unreachable": "always incorrect in both runs",
}
FISHER: Final = "fisher_exact"
MANN_WHITNEY: Final = "mann_whitney"
TEST_LABELS: Final[dict[str, str]] = {
    FISHER: "Fisher's exact test (two-sided) on passes and failures",
    MANN_WHITNEY: "Mann-Whitney U test (two-sided, normal approximation with tie and "
    "continuity corrections) on the rollout scores",
}


def transition_name(before: str, after: str) -> str:
    """The `--keep` name of a transition: `incorrect-to-mixed`, `correct-to-correct`, ..."""
    return f"{SHORT_LABELS[before]}-to-{SHORT_LABELS[after]}"


# Worst to best, so the table reads like a pass-rate scale.
OUTCOME_ORDER: Final[tuple[str, ...]] = ("always_incorrect", "mixed", "always_correct")
TRANSITIONS: Final[tuple[tuple[str, str], ...]] = tuple(
    (a, b) for a in OUTCOME_ORDER for b in OUTCOME_ORDER
)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on the table [[a, b], [c, d]].

    With the margins fixed, the top-left cell is hypergeometric; the p-value is the sum
    of the probabilities of every table no more likely than the observed one (the
    usual two-sided definition, as in R's fisher.test and scipy.stats.fisher_exact).
    """
    if min(a, b, c, d) < 0:
        raise ValueError("a 2x2 table holds counts >= 0")
    row1, row2, col1 = a + b, c + d, a + c
    total = row1 + row2
    if row1 == 0 or row2 == 0 or col1 == 0 or col1 == total:
        return 1.0  # a margin is empty: every table is the observed one
    base = _log_choose(total, col1)

    def log_p(x: int) -> float:
        return _log_choose(row1, x) + _log_choose(row2, col1 - x) - base

    observed = log_p(a)
    limit = observed + math.log1p(_RELATIVE_TIE)
    p = sum(
        math.exp(lp)
        for lp in (log_p(x) for x in range(max(0, col1 - row2), min(row1, col1) + 1))
        if lp <= limit
    )
    return min(1.0, p)


def fisher_table(keys: Iterable[tuple[int, int, int, int]]) -> pl.DataFrame:
    """Fisher p-values for distinct (n_a, c_a, n_b, c_b): n rollouts, c passes per run.

    Samples share few distinct count pairs (81 at N = 8), so the exact sums are done once
    per pair, not once per sample."""
    import polars as pl

    rows = []
    for n_a, c_a, n_b, c_b in sorted(set(keys)):
        rows.append((n_a, c_a, n_b, c_b, fisher_exact(c_a, n_a - c_a, c_b, n_b - c_b)))
    return pl.DataFrame(
        rows,
        schema={
            "n_a": pl.Int64,
            "c_a": pl.Int64,
            "n_b": pl.Int64,
            "c_b": pl.Int64,
            "p": pl.Float64,
        },
        orient="row",
    )


def fisher_p_values(pairs: pl.DataFrame) -> pl.Series:
    """Fisher's two-sided p-value per row of `pairs` (columns n_a, c_a, n_b, c_b)."""
    import polars as pl

    keys = pairs.select("n_a", "c_a", "n_b", "c_b").cast(pl.Int64)
    table = fisher_table(keys.unique().iter_rows())
    joined = keys.with_row_index("_row").join(table, on=["n_a", "c_a", "n_b", "c_b"], how="left")
    return joined.sort("_row")["p"].alias("p_value")


def mann_whitney_p_values(scores_a: pl.LazyFrame, scores_b: pl.LazyFrame) -> pl.DataFrame:
    """Two-sided Mann-Whitney U p-value per sample from two runs' scored rollouts
    (columns sample_id, score); samples in both only. Returns sample_id, p_value.

    U is A's rank sum minus n_a(n_a+1)/2 over the pooled scores (mid-ranks for ties);
    z = (|U - n_a n_b/2| - 1/2) / sigma with the tie-corrected
    sigma^2 = n_a n_b/12 * ((n+1) - sum(t^3 - t) / (n(n-1))). A sample whose pooled
    scores are all equal gives no evidence of change: p = 1.
    """
    import polars as pl

    pooled = pl.concat(
        [
            scores_a.select("sample_id", "score", pl.lit(True).alias("in_a")),
            scores_b.select("sample_id", "score", pl.lit(False).alias("in_a")),
        ]
    ).with_columns(pl.col("score").rank("average").over("sample_id").alias("rank"))
    ties = (
        pooled.group_by("sample_id", "score")
        .agg(pl.len().cast(pl.Float64).alias("t"))
        .group_by("sample_id")
        .agg((pl.col("t") ** 3 - pl.col("t")).sum().alias("tie_sum"))
    )
    sums = pooled.group_by("sample_id").agg(
        pl.col("in_a").sum().cast(pl.Float64).alias("na"),
        (~pl.col("in_a")).sum().cast(pl.Float64).alias("nb"),
        pl.col("rank").filter(pl.col("in_a")).sum().alias("ra"),
    )
    na, nb, n = pl.col("na"), pl.col("nb"), pl.col("na") + pl.col("nb")
    u = pl.col("ra") - na * (na + 1) / 2
    var = na * nb / 12 * ((n + 1) - pl.col("tie_sum") / (n * (n - 1)))
    z = ((u - na * nb / 2).abs() - 0.5).clip(lower_bound=0.0) / var.sqrt()
    frame = (
        sums.join(ties, on="sample_id")
        .filter((na > 0) & (nb > 0))
        .with_columns(z.alias("z"), var.alias("var"))
        .collect()
    )
    # Two-sided normal tail: erfc(z / sqrt 2). polars has no erfc; few distinct z values.
    tails = {z: math.erfc(z / math.sqrt(2.0)) for z in frame["z"].drop_nulls().unique()}
    p = [
        1.0 if var is None or var <= 0.0 or z is None else min(1.0, tails[z])
        for z, var in zip(frame["z"], frame["var"], strict=True)
    ]
    return frame.select("sample_id").with_columns(pl.Series("p_value", p, dtype=pl.Float64))


# The per-sample statistics each side of a comparison keeps (suffixed _a and _b).
_SIDE_COLUMNS: Final = (
    "n_rollouts",
    "successes",
    "pass_rate",
    "wilson_low",
    "wilson_high",
    "mean_score",
    "best_score",
    "worst_score",
)


def match_samples(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The two per-sample frames side by side, samples in both with a scored rollout in
    each (columns `<stat>_a`, `<stat>_b`, and each side's `outcome_a`/`outcome_b`)."""
    import polars as pl

    def side(frame: pl.DataFrame, tag: str) -> pl.DataFrame:
        picked = frame.filter(pl.col("n_rollouts") > 0).select("sample_id", *_SIDE_COLUMNS)
        picked = picked.with_columns(outcome_expr().alias("outcome"))
        return picked.rename({c: f"{c}_{tag}" for c in picked.columns if c != "sample_id"})

    return side(a, "a").join(side(b, "b"), on="sample_id", how="inner")


def compare_samples(
    matched: pl.DataFrame,
    *,
    alpha: float = DEFAULT_ALPHA,
    p_values: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per-sample comparison of `match_samples`' frame: the change in pass rate (mean
    score for partial credit), the test's p-value, whether it is significant at `alpha`,
    and one boolean column per named set (`SETS`).

    `p_values` (sample_id, p_value: `mann_whitney_p_values`) replaces Fisher's test for
    partial-credit scores; without it the passes and failures go to Fisher's test.
    """
    import polars as pl

    if p_values is None:
        pvals = fisher_p_values(
            matched.select(
                pl.col("n_rollouts_a").alias("n_a"),
                pl.col("successes_a").alias("c_a"),
                pl.col("n_rollouts_b").alias("n_b"),
                pl.col("successes_b").alias("c_b"),
            )
        )
        frame = matched.with_columns(pvals)
        rate_a, rate_b = pl.col("pass_rate_a"), pl.col("pass_rate_b")
    else:
        frame = matched.join(p_values, on="sample_id", how="left").with_columns(
            pl.col("p_value").fill_null(1.0)
        )
        rate_a, rate_b = pl.col("mean_score_a"), pl.col("mean_score_b")
    change = rate_b - rate_a
    significant = pl.col("p_value") < alpha
    out_a, out_b = pl.col("outcome_a"), pl.col("outcome_b")
    return frame.with_columns(
        change.alias("change"),
        significant.alias("significant"),
    ).with_columns(
        (pl.col("significant") & (pl.col("change") > 0)).alias("learned"),
        (pl.col("significant") & (pl.col("change") < 0)).alias("forgotten"),
        # Learnable means a group can be mixed: rewards that differ. A sample at 0.5 every
        # time is "mixed" as an outcome but gives every group the same reward.
        (
            (out_a == "always_incorrect")
            & (out_b == "mixed")
            & (pl.col("best_score_b") > pl.col("worst_score_b"))
        ).alias("newly_learnable"),
        ((out_a == "always_incorrect") & (out_b == "always_incorrect")).alias("still_unreachable"),
    )


def transition_counts(compared: pl.DataFrame) -> list[tuple[str, str, int]]:
    """(outcome before, outcome after, samples) for all nine transitions, in OUTCOMES
    order (a transition no sample made counts 0)."""
    import polars as pl

    counts = {
        (str(a), str(b)): int(n)
        for a, b, n in compared.group_by("outcome_a", "outcome_b").agg(pl.len()).iter_rows()
    }
    return [(a, b, counts.get((a, b), 0)) for a, b in TRANSITIONS]


def set_counts(compared: pl.DataFrame) -> dict[str, int]:
    """Samples in each named set."""
    import polars as pl

    row = compared.select(pl.col(name).cast(pl.Int64).sum() for name in SETS).row(0)
    return {name: int(value or 0) for name, value in zip(SETS, row, strict=True)}


def smallest_significant_rise(n_a: int, n_b: int, alpha: float = DEFAULT_ALPHA) -> int | None:
    """The fewest passes out of `n_b` that count as a significant rise over 0 passes out
    of `n_a` (Fisher, two-sided): how coarse the test is at this rollout count. None
    when even n_b of n_b is not significant."""
    for passes in range(n_b + 1):
        if fisher_exact(0, n_a, passes, n_b - passes) < alpha:
            return passes
    return None


# -- the forecast check: the first run's pass rates as a prediction of the last's ------

# Bins of the first run's pass rate; 0 and 1 stand alone (always incorrect / correct).
FORECAST_EDGES: Final[tuple[float, ...]] = (0.0, 0.25, 0.5, 0.75, 1.0)


def forecast_check(compared: pl.DataFrame, *, binary: bool) -> dict[str, object]:
    """How well run A's per-sample pass rates (mean scores for partial credit) predict
    run B's on the same samples: a calibration table over bins of A's rate (samples, mean
    of A's rate = the forecast, mean of B's = what happened), Pearson's r, Spearman's rank
    correlation and the mean absolute error. `curate compare BASELINE TRAINER_STEP`
    checks the curation run against what the trainer then saw."""
    import polars as pl

    col = "pass_rate" if binary else "mean_score"
    a, b = pl.col(f"{col}_a"), pl.col(f"{col}_b")
    frame = compared.select(a.alias("a"), b.alias("b")).drop_nulls()
    bins: list[dict[str, object]] = []
    edges = FORECAST_EDGES
    cuts = [("0", a_is(0.0))]
    for lo, hi in itertools.pairwise(edges):
        expr = (pl.col("a") > lo) & ((pl.col("a") <= hi) if hi < 1.0 else (pl.col("a") < hi))
        cuts.append((f"({lo:g}, {hi:g}{']' if hi < 1.0 else ')'}", expr))
    cuts.append(("1", a_is(1.0)))
    for label, expr in cuts:
        part = frame.filter(expr)
        bins.append(
            {
                "bin": label,
                "samples": part.height,
                "predicted": part["a"].mean() if part.height else None,
                "observed": part["b"].mean() if part.height else None,
            }
        )
    stats = frame.select(
        pl.corr("a", "b", method="pearson").alias("pearson"),
        pl.corr("a", "b", method="spearman").alias("spearman"),
        (pl.col("a") - pl.col("b")).abs().mean().alias("mean_abs_error"),
        pl.col("a").mean().alias("predicted_mean"),
        pl.col("b").mean().alias("observed_mean"),
    ).row(0, named=True)
    return {"samples": frame.height, **stats, "bins": bins}


def a_is(value: float) -> pl.Expr:
    import polars as pl

    return pl.col("a") == value
