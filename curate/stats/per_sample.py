"""Per-sample statistics: one row per sample from long-format rollouts.

Definitions follow the variance-plot method (population variance, best/worst, the
four categories) and the gate view of standardised GRPO (a group of G rollouts is
informative only when its rewards are not all equal: `curate.stats.mixed`). A row
with an error is never a score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from curate.core.outcome import (
    DEFAULT_GROUP_SIZE,
    DEFAULT_THRESHOLD,
    PASS_SCORE,
    category_expr,
)
from curate.stats.estimators import wilson_interval
from curate.stats.mixed import (
    ScoreModel,
    binary_signature,
    fit_score_model,
    mixed_probability,
    sample_probabilities,
)
from curate.stats.multiplicity import MULTIPLICITY, pair_histogram, with_multiplicity
from curate.stats.prior import fit_prior_counts

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.prior import Prior

# The report's breakdown column (a sample's data_source or --group-by value), carried
# through the per-sample statistics when present.
GROUP = "group"


def aggregate_rollouts(rollouts: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Group rollouts by sample: counts, sums, extremes (one pass over the rows)."""
    return rollouts.lazy().group_by("sample_id").agg(*aggregate_exprs()).collect()


def aggregate_exprs() -> list[pl.Expr]:
    """The per-sample aggregations of `aggregate_rollouts` over validated `score` and
    `error` columns (for callers that fuse them into a larger query, e.g. the loader)."""
    import polars as pl

    score = pl.col("score")
    return [
        *count_exprs(),
        score.sum().alias("score_sum"),
        (score * score).sum().alias("score_sq_sum"),
        score.max().alias("best_score"),
        score.min().alias("worst_score"),
        ((score > 0) & (score < PASS_SCORE)).sum().cast(pl.Int64).alias("partial"),
    ]


def count_exprs() -> list[pl.Expr]:
    """The three counts of `aggregate_exprs` (n_rollouts, n_errors, successes): with
    0/1 scores the rest of the aggregate follows from them (`binary_aggregate`)."""
    import polars as pl

    score = pl.col("score")
    return [
        score.count().cast(pl.Int64).alias("n_rollouts"),
        pl.col("error").is_not_null().sum().cast(pl.Int64).alias("n_errors"),
        (score >= PASS_SCORE).sum().cast(pl.Int64).alias("successes"),
    ]


def aggregate_fixed_width(sample_ids: pl.Series, scores: pl.Series, width: int) -> pl.DataFrame:
    """`aggregate_rollouts` for the dense layout: each sample's rollouts are `width`
    consecutive rows, every one scored (no error, no null), each sample in one block.

    `sample_ids` has one id per block, `scores` the len(sample_ids) * width scores in
    row order. Fixed-width array reductions replace the hash group-by (several times
    cheaper on millions of rows); the columns and dtypes are aggregate_rollouts' own.
    """
    import polars as pl

    score = pl.col("score")

    def per_sample(expr: pl.Expr) -> pl.expr.array.ExprArrayNameSpace:
        return expr.reshape((-1, width)).arr

    # One contiguous buffer up front (a file read arrives in chunks): otherwise every
    # reshape below copies the column again.
    reduced = pl.DataFrame({"score": scores.rechunk()}).select(
        pl.lit(width, dtype=pl.Int64).alias("n_rollouts"),
        pl.lit(0, dtype=pl.Int64).alias("n_errors"),
        per_sample(score >= PASS_SCORE).sum().cast(pl.Int64).alias("successes"),
        per_sample(score).sum().alias("score_sum"),
        per_sample(score * score).sum().alias("score_sq_sum"),
        per_sample(score).max().alias("best_score"),
        per_sample(score).min().alias("worst_score"),
        per_sample((score > 0) & (score < PASS_SCORE)).sum().cast(pl.Int64).alias("partial"),
    )
    return reduced.insert_column(0, sample_ids.cast(pl.String).alias("sample_id"))


def aggregate_run_blocks(sample_ids: pl.Series, runs: list[pl.Series]) -> pl.DataFrame:
    """`aggregate_rollouts` for the run-major dense layout: `runs[r][i]` is the score of
    run r of sample `sample_ids[i]`, every one scored (no error, no null), each sample
    once. Element-wise folds over the runs replace the hash group-by; the columns and
    dtypes are aggregate_rollouts' own.
    """
    import polars as pl

    names = [f"run{r}" for r in range(len(runs))]
    frame = pl.DataFrame([run.alias(name) for run, name in zip(runs, names, strict=True)])
    cols = [pl.col(name) for name in names]

    def fold(exprs: list[pl.Expr]) -> pl.Expr:  # left to right, as the rows come
        out = exprs[0]
        for expr in exprs[1:]:
            out = out + expr
        return out

    reduced = frame.select(
        pl.lit(len(runs), dtype=pl.Int64).alias("n_rollouts"),
        pl.lit(0, dtype=pl.Int64).alias("n_errors"),
        fold([(c >= PASS_SCORE).cast(pl.Int64) for c in cols]).alias("successes"),
        fold(cols).alias("score_sum"),
        fold([c * c for c in cols]).alias("score_sq_sum"),
        pl.max_horizontal(cols).alias("best_score"),
        pl.min_horizontal(cols).alias("worst_score"),
        fold([((c > 0) & (c < PASS_SCORE)).cast(pl.Int64) for c in cols]).alias("partial"),
    )
    return reduced.insert_column(0, sample_ids.cast(pl.String).alias("sample_id"))


def binary_counts_aggregate(successes: pl.Series, width: int) -> pl.DataFrame:
    """The compressed `aggregate_rollouts` of a dense 0/1 matrix: one row per distinct
    success count, from each sample's count of passes among its `width` rollouts (no
    error, no null). Equal to `compress_binary_aggregate(aggregate_fixed_width(...))`.
    """
    import polars as pl

    counts = successes.cast(pl.Int64).alias("successes").value_counts(name=MULTIPLICITY)
    return binary_aggregate(
        counts.with_columns(
            pl.lit(width, dtype=pl.Int64).alias("n_rollouts"),
            pl.lit(0, dtype=pl.Int64).alias("n_errors"),
        )
    ).sort("successes")


def binary_fixed_width_aggregate(scores: pl.Series, width: int) -> pl.DataFrame:
    """The compressed aggregate of a dense 0/1 matrix stored sample by sample: `scores`
    holds one block of `width` scores per sample (no error, no null)."""
    import polars as pl

    # The passes per block are all the statistics need.
    passes = (scores == 1.0).cast(pl.UInt8).reshape((-1, width)).arr.sum()
    return binary_counts_aggregate(passes, width)


def binary_aggregate(counts: pl.DataFrame) -> pl.DataFrame:
    """`aggregate_rollouts`' columns for 0/1 scores from each row's `n_rollouts`,
    `n_errors` and `successes` (with 0/1 scores the rest follow from these three);
    sample_id and multiplicity are carried when present."""
    import polars as pl

    n, c = pl.col("n_rollouts"), pl.col("successes")
    scored = n > 0
    return counts.select(
        *(["sample_id"] if "sample_id" in counts.columns else []),
        n.cast(pl.Int64),
        pl.col("n_errors").cast(pl.Int64),
        c.cast(pl.Int64),
        c.cast(pl.Float64).alias("score_sum"),
        c.cast(pl.Float64).alias("score_sq_sum"),
        pl.when(scored).then((c > 0).cast(pl.Float64)).alias("best_score"),
        pl.when(scored).then((c == n).cast(pl.Float64)).alias("worst_score"),
        pl.lit(0, dtype=pl.Int64).alias("partial"),
        *([pl.col(MULTIPLICITY).cast(pl.Int64)] if MULTIPLICITY in counts.columns else []),
    )


def compress_binary_aggregate(aggregated: pl.DataFrame, keys: tuple[str, ...] = ()) -> pl.DataFrame:
    """Merge the samples of a 0/1 aggregate that share (n_rollouts, n_errors,
    successes) and the columns `keys` (the report's `group`) into one row with a
    `multiplicity`, dropping sample_id.

    With 0/1 scores every other aggregate column is a function of those three, so
    data-set statistics weighted by multiplicity equal the per-sample ones, at the
    cost of a few rows instead of one per sample (what `curate report` needs).
    """
    import polars as pl

    if not is_binary(aggregated):
        raise ValueError("only 0/1 scores can be compressed: partial credit needs rollouts")
    by = ["n_rollouts", "n_errors", "successes", *keys]
    rest = [c for c in aggregated.columns if c not in (*by, "sample_id", MULTIPLICITY)]
    return (
        with_multiplicity(aggregated)
        .group_by(by)
        .agg(*(pl.col(c).first() for c in rest), pl.col(MULTIPLICITY).sum())
        .select(*by, *rest, MULTIPLICITY)
        .sort(by, nulls_last=True)
    )


def is_binary(aggregated: pl.DataFrame) -> bool:
    """True when every scored rollout is 0 or 1."""
    return int(aggregated["partial"].sum()) == 0


def fit_prior(aggregated: pl.DataFrame) -> Prior:
    """The empirical-Bayes pass-rate prior (the NPMLE, `curate.stats.prior`), fitted on
    the (n, c) histogram of the whole data set: the one prior behind every model-based
    figure."""

    # Sorted: the fit sums over the histogram, so its order must not depend on hashing.
    hist = pair_histogram(aggregated, scored_only=True)
    return fit_prior_counts((int(n), float(c), int(w)) for n, c, w in hist)


def sample_stats(
    rollouts: pl.DataFrame | pl.LazyFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    prior: Prior | None = None,
) -> pl.DataFrame:
    """One row per sample with every per-sample statistic curate reports."""
    agg = aggregate_rollouts(rollouts)
    return stats_from_aggregate(
        agg,
        rollouts,
        prior=prior or fit_prior(agg),
        threshold=threshold,
        group_size=group_size,
        model=None if is_binary(agg) else fit_score_model(rollouts),
    )


def stats_from_aggregate(
    agg: pl.DataFrame,
    rollouts: pl.DataFrame | pl.LazyFrame,
    *,
    prior: Prior,
    threshold: float,
    group_size: int,
    model: ScoreModel | None = None,
) -> pl.DataFrame:
    """`sample_stats` on an already aggregated frame (rollouts are read again only
    for partial-credit scores, unless `model`, their `fit_score_model`, is given). A
    compressed aggregate (`compress_binary_aggregate`) gives a compressed result: no
    sample_id, a `multiplicity` per row. A `group` column (the report's breakdown) is
    carried through."""
    import polars as pl

    compressed = MULTIPLICITY in agg.columns

    n = pl.col("n_rollouts")
    has = n > 0
    mean = pl.col("score_sum") / n
    # E[x^2] - E[x]^2, snapped to exactly 0 when every score is the same, so
    # "variance 0" (the variance-plot method's test) never depends on rounding.
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
    frame = _attach_pairs(frame, pairs)
    if not is_binary(agg):
        if compressed:
            raise ValueError("a compressed aggregate must hold 0/1 scores only")
        model = model if model is not None else fit_score_model(rollouts)
        frame = frame.drop("gate_open_probability").join(
            sample_probabilities(model, group_size), on="sample_id", how="left"
        )
    frame = frame.with_columns(category_expr(threshold).alias("category"))
    return frame.select(
        *([] if compressed else ["sample_id"]),
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
        *([GROUP] if GROUP in frame.columns else []),
        *([MULTIPLICITY] if compressed else []),
    )


def gate_forecast(n: int, c: int, prior: Prior, group_size: int) -> float:
    """P(a group of `group_size` is mixed) for a 0/1 sample with c passes in n:
    `mixed_probability` under the pass-rate prior (unbiased from the outcomes when
    n >= G, else the posterior predictive)."""
    return mixed_probability(ScoreModel.binary(prior), binary_signature(n, c), group_size)


def _pair_table(frame: pl.DataFrame, prior: Prior, group_size: int) -> pl.DataFrame:
    """Estimators that depend only on (n, c), computed once per distinct pair."""
    import polars as pl

    model = ScoreModel.binary(prior)
    rows: list[tuple[int, int, float | None, float | None, float | None, float | None]] = []
    for n, c, _ in pair_histogram(frame):
        if n == 0:
            rows.append((n, c, None, None, None, None))
            continue
        lo, hi = wilson_interval(c, n)
        gate = mixed_probability(model, binary_signature(n, c), group_size)
        rows.append((n, c, lo, hi, prior.smooth(c, n), gate))
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


# Largest dense (n, c) lookup table `_attach_pairs` builds before it joins instead.
_DENSE_PAIRS_MAX = 1 << 20


def _attach_pairs(frame: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """`frame.join(pairs, on=["n_rollouts", "successes"], how="left")`, as a gather.

    Every (n, c) of `frame` is in `pairs` and 0 <= c <= n, so n * (n_max + 1) + c
    indexes a small dense table: one gather per column instead of a hash join.
    """
    import polars as pl

    on = ["n_rollouts", "successes"]
    width = int(pairs.select(pl.col("n_rollouts").max()).item() or 0) + 1
    if pairs.height == 0 or width * width > _DENSE_PAIRS_MAX:
        return frame.join(pairs, on=on, how="left")
    index = pairs["n_rollouts"] * width + pairs["successes"]
    key = pl.col("n_rollouts") * width + pl.col("successes")
    columns = []
    for name in pairs.columns:
        if name in on:
            continue
        dense = pl.Series(name, [None] * (width * width), dtype=pairs[name].dtype)
        columns.append(pl.lit(dense.scatter(index, pairs[name])).gather(key).alias(name))
    return frame.with_columns(columns)
