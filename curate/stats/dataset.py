"""Data-set level statistics from the per-sample frame: the variance-plot method's
summary, the mixed-group ("gate") view, the compute multiplier, errors and groups.

The frame has one row per sample, or is compressed (one row per distinct statistics
with a `multiplicity`, see `per_sample.compress_binary_aggregate`): every statistic
here weights a row by the samples it stands for. Every mixed-group figure averages
`curate.stats.mixed.mixed_probability` over samples (`gate_curve`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from curate.core.outcome import CATEGORIES
from curate.stats import adaptive as adaptive_stats
from curate.stats.estimators import pass_at_k
from curate.stats.intervals import can_bound, gain_bound, mixed_interval, multiplier_range
from curate.stats.mixed import ScoreModel, mixed_curve, signature_histogram
from curate.stats.multiplicity import MULTIPLICITY, pair_histogram, with_multiplicity
from curate.stats.per_sample import GROUP

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.intervals import Interval
    from curate.stats.prior import Prior

# The variance-plot method's guidance on the share of high-variance samples.
LOW_SIGNAL_SHARE = 0.10
# Best-of-N this close to the mean means the model is consistent (the variance-plot
# method's warning).
CONSISTENT_GAIN = 0.02
MIN_RUNS = 3
SMALL_DATASET = 50
# Model-based multiplier: stop when another G rollouts per prompt opens fewer
# than this share of additional groups.
MULTIPLIER_MIN_GAIN = 0.02
MAX_MULTIPLIER = 8
# Prompts an undecided multiplier's remedy deepens (all of the all-same ones when
# fewer). What pins a tail is how many of its prompts are deepened, not their share:
# on 4,000 prompts with 40% never solvable, deepening 400 of the ~1,900 all-same ones
# from 8 to 32 rollouts narrows the multiplier from 2x-8x to 2x-3x, for a tenth of the
# rollouts of -n 32 (`benchmarks/bench_deepen.py` prints it, with the populations where
# it narrows less).
REMEDY_PROMPTS = 400
# Error messages the report lists.
TOP_ERRORS = 5


@dataclass
class ComputeMultiplier:
    """How many times the group size to train with, and why.

    `recommended` (m) multiplies `group_size` (G): train with groups of
    `recommended_group_size` = G*m rollouts per prompt, where an expected
    `recommended_open_fraction` of groups are mixed (`expected_open_fraction` at G);
    groups of `next_group_size` would add `next_gain` more. `rule_of_thumb` is the
    variance-plot method's range for the high-variance share ({"low": int, "high": int},
    both null when the share is too small for more rollouts to help), and
    `rule_of_thumb_text` the same in words ("1-2x").
    """

    recommended: int
    rule_of_thumb: dict[str, int | None]
    reason: str
    rule: str
    rule_of_thumb_text: str = ""
    group_size: int = 0
    recommended_group_size: int = 0
    expected_open_fraction: float = 0.0
    recommended_open_fraction: float = 0.0
    next_group_size: int = 0
    next_gain: float = 0.0
    # 95% intervals of the figures past the rollouts taken (`curate.stats.intervals`;
    # None when the figure needs no model, or the prior has no interval):
    # {"low", "high"} of recommended_open_fraction and next_gain, and of the multiplier
    # itself. `decided` is False when the interval of the multiplier holds more than one
    # value: the data cannot choose it, and `reason` says so and what to do.
    recommended_open_interval: dict[str, float] | None = None
    next_gain_interval: dict[str, float] | None = None
    recommended_range: dict[str, int] | None = None
    decided: bool = True
    # When undecided, the rollouts that would pin the tails (`remedy_of`): a fixed-N
    # run's {"deepen": K, "to": M} (`curate eval --deepen K --to M`), an adaptive run's
    # {"max_runs": M}, or {"runs": M} when no prompt is all the same; None when decided.
    remedy: dict[str, int] | None = None


@dataclass
class DatasetSummary:
    samples: int
    unscored_samples: int
    rollouts: int
    errors: int
    error_rate: float
    mean_score: float | None
    best_of_n: float | None
    potential_gain: float | None
    relative_gain: float | None
    high_variance_fraction: float
    threshold: float
    categories: dict[str, int]
    pass_at_k: dict[str, float]
    gate: dict[str, Any]
    compute_multiplier: ComputeMultiplier
    rollouts_per_sample: dict[str, float]
    binary_scores: bool
    prior: dict[str, Any]
    top_errors: list[dict[str, Any]] = field(default_factory=list)
    group_by: str | None = None
    by_group: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        extra = out.pop("extra")
        out.update(extra)
        return out


def pass_at_k_table(per_sample: pl.DataFrame, ks: list[int] | None = None) -> pl.DataFrame:
    """Mean unbiased pass@k over samples with at least k scored rollouts."""
    import polars as pl

    hist = pair_histogram(per_sample, scored_only=True)
    max_n = max((n for n, _, _ in hist), default=0)
    ks = ks or list(range(1, max_n + 1))
    rows = []
    for k in ks:
        usable = [(n, c, w) for n, c, w in hist if n >= k]
        weight = sum(w for _, _, w in usable)
        if weight == 0:
            continue
        value = sum(w * pass_at_k(n, c, k) for n, c, w in usable) / weight
        rows.append((k, value, weight))
    return pl.DataFrame(
        rows, schema={"k": pl.Int64, "pass_at_k": pl.Float64, "samples": pl.Int64}, orient="row"
    )


def pass_at_k_columns(per_sample: pl.DataFrame, ks: list[int]) -> pl.DataFrame:
    """Per-sample pass@k columns (`pass@1`, ...); null where n < k."""
    import polars as pl

    pairs = per_sample.select("n_rollouts", "successes").unique()
    cols = {
        f"pass@{k}": [pass_at_k(n, c, k) if n >= k else None for n, c in pairs.iter_rows()]
        for k in ks
    }
    table = pairs.with_columns(
        [pl.Series(name, vals, dtype=pl.Float64) for name, vals in cols.items()]
    )
    return per_sample.join(table, on=["n_rollouts", "successes"], how="left")


def gate_curve(
    per_sample: pl.DataFrame,
    prior: Prior,
    group_sizes: list[int],
    *,
    binary: bool = True,
    model: ScoreModel | None = None,
    nominal_runs: int | None = None,
    intervals: bool = False,
) -> pl.DataFrame:
    """Expected share of samples whose group of size G is mixed (rewards not all
    equal), per G: the sample mean of `mixed_probability` (unbiased where a sample has
    n >= G rollouts, the calibrated posterior predictive beyond).

    `model` is the analysis' `ScoreModel`; 0/1 scores may leave it out (it follows from
    `prior`), partial credit may not. `nominal_runs`: an adaptive run's N (0/1 scores),
    whose curve is model-based (`curate.stats.adaptive.adaptive_gate`). `intervals`
    adds `interval_low` and `interval_high`, the 95% interval of each model-based point
    (`mixed_share_interval`; null where no model is needed)."""
    import polars as pl

    if nominal_runs is not None and binary:
        hist = pair_histogram(per_sample, scored_only=True)
        values = [adaptive_stats.adaptive_gate(hist, prior, nominal_runs, g) for g in group_sizes]
    else:
        if model is None:
            if not binary:
                raise ValueError("partial-credit scores need the ScoreModel of their analysis")
            model = ScoreModel.binary(prior)
        values = mixed_curve(model, signature_histogram(model, per_sample), group_sizes)
    out = pl.DataFrame(
        list(zip(group_sizes, values, strict=True)),
        schema={"group_size": pl.Int64, "expected_open_fraction": pl.Float64},
        orient="row",
    )
    if not intervals:
        return out
    fewest = min_rollouts(per_sample)
    adaptive = nominal_runs is not None and binary
    shape = model if model is not None else ScoreModel.binary(prior)
    bounds = [mixed_share_interval(shape, g, fewest, adaptive=adaptive) for g in group_sizes]
    return out.with_columns(
        pl.Series("interval_low", [b.low if b else None for b in bounds], dtype=pl.Float64),
        pl.Series("interval_high", [b.high if b else None for b in bounds], dtype=pl.Float64),
    )


def min_rollouts(per_sample: pl.DataFrame) -> int:
    """The fewest scored rollouts of any scored sample (0 without one)."""
    import polars as pl

    value = per_sample.filter(pl.col("n_rollouts") > 0)["n_rollouts"].min()
    return int(value) if isinstance(value, int) else 0


def extrapolated(group_size: int, fewest: int, *, adaptive: bool) -> bool:
    """Whether mixed groups at `group_size` need the prior: some sample has fewer
    rollouts than the group (or the run stopped samples early, so every figure does)."""
    return adaptive or group_size > fewest


def mixed_share_interval(
    model: ScoreModel, group_size: int, fewest: int, *, adaptive: bool
) -> Interval | None:
    """The 95% interval of the population share of mixed groups at `group_size`
    (`curate.stats.intervals`), or None when the figure needs no model or a prior
    carries no likelihood to bound it with (a hand-made prior)."""

    if not extrapolated(group_size, fewest, adaptive=adaptive) or not can_bound(model):
        return None
    return mixed_interval(model, group_size)


def rule_of_thumb(high_variance_fraction: float) -> dict[str, int | None]:
    """The variance-plot method's compute multiplier for a high-variance share (the
    "Variance-Based RL Sample Selection" pattern): {"low", "high"}, both None under 10%
    (too little signal for more rollouts to help)."""
    if high_variance_fraction < LOW_SIGNAL_SHARE:
        return {"low": None, "high": None}
    if high_variance_fraction < 0.15:
        return {"low": 2, "high": 4}
    if high_variance_fraction <= 0.30:
        return {"low": 1, "high": 2}
    return {"low": 1, "high": 1}


def rule_of_thumb_text(rule: dict[str, int | None]) -> str:
    """`rule_of_thumb` in words: "1x", "1-2x", or "none (under 10%)"."""
    low, high = rule["low"], rule["high"]
    if low is None or high is None:
        return f"none (under {LOW_SIGNAL_SHARE:.0%})"
    return f"{low}x" if low == high else f"{low}-{high}x"


def points_text(gain: float) -> str:
    """A difference of two shares in percentage points, for sentences."""
    return "nothing" if gain < 0.0005 else f"{gain * 100:.1f} points"


def adds_text(gain: float) -> str:
    """What one more step of group size would add: "would add only 1.2 points"."""
    return "would add nothing" if gain < 0.0005 else f"would add only {points_text(gain)}"


def compute_multiplier(
    per_sample: pl.DataFrame,
    group_size: int,
    high_variance_fraction: float,
    *,
    prior: Prior,
    binary: bool,
    model: ScoreModel | None = None,
    open_fractions: Mapping[int, float] | None = None,
) -> ComputeMultiplier:
    """Smallest m such that going to group size G*(m+1) opens < 2% more groups, on the
    same curve as the report's headline and the gate plot (`gate_curve`).

    `open_fractions` (group size -> expected mixed share) replaces the gate curve:
    an adaptive run passes its model-based one (`curate.stats.adaptive`)."""
    sizes = [group_size * m for m in range(1, MAX_MULTIPLIER + 2)]
    fractions = gate_curve(per_sample, prior, sizes, binary=binary, model=model)
    curve = dict(
        zip(range(1, MAX_MULTIPLIER + 2), fractions["expected_open_fraction"], strict=True)
    )
    if open_fractions is not None:  # adaptive run
        curve = {m: open_fractions[group_size * m] for m in curve}
    recommended = MAX_MULTIPLIER
    for m in range(1, MAX_MULTIPLIER + 1):
        if curve[m + 1] - curve[m] < MULTIPLIER_MIN_GAIN:
            recommended = m
            break
    g, m = group_size, recommended
    now, then, gain = curve[1], curve[m], curve[m + 1] - curve[m]
    if m == 1:
        reason = (
            f"keep groups of {g}: {now:.1%} of groups are mixed, and groups of {2 * g} "
            f"{adds_text(gain)}"
        )
    else:
        reason = (
            f"use groups of {g * m} ({m}x the group size of {g}): {then:.1%} of groups would "
            f"be mixed instead of {now:.1%}; "
            + (
                f"groups of {g * (m + 1)} {adds_text(gain)}"
                if m < MAX_MULTIPLIER or gain < MULTIPLIER_MIN_GAIN
                else f"larger groups still add {points_text(gain)} per {g} more rollouts, "
                "so filtering out samples that never mix may pay more"
            )
        )
    rule = rule_of_thumb(high_variance_fraction)
    out = ComputeMultiplier(
        recommended=recommended,
        rule_of_thumb=rule,
        reason=reason,
        rule=(
            f"the smallest m (up to {MAX_MULTIPLIER}) at which raising the group size from "
            f"G*m to G*(m+1) adds fewer than {MULTIPLIER_MIN_GAIN * 100:.0f} points of mixed "
            "groups (per sample: unbiased where n >= the group size, else the calibrated "
            "posterior predictive)"
        ),
        rule_of_thumb_text=rule_of_thumb_text(rule),
        group_size=g,
        recommended_group_size=g * m,
        expected_open_fraction=now,
        recommended_open_fraction=then,
        next_group_size=g * (m + 1),
        next_gain=gain,
    )
    _multiplier_intervals(
        out,
        curve,
        model if model is not None else ScoreModel.binary(prior),
        min_rollouts(per_sample),
        adaptive=open_fractions is not None,
        all_same=all_same_count(per_sample),
    )
    return out


def all_same_count(per_sample: pl.DataFrame) -> int:
    """Scored samples whose every rollout got the same full or no credit (always
    correct or always incorrect): the ones deepening draws from."""
    import polars as pl

    if "category" not in per_sample.columns:
        return 0
    same = with_multiplicity(per_sample).filter(
        pl.col("category").is_in(["always_correct", "always_incorrect"])
        & (pl.col("n_rollouts") > 0)
    )
    return int(same[MULTIPLICITY].sum() or 0)


def _multiplier_intervals(
    m: ComputeMultiplier,
    curve: Mapping[int, float],
    model: ScoreModel,
    fewest: int,
    *,
    adaptive: bool,
    all_same: int = 0,
) -> None:
    """Fill the multiplier's intervals (`curate.stats.intervals`) where its figures
    need the prior, and say so in `reason` when the data cannot choose the multiplier."""

    if not can_bound(model):
        return
    g = m.group_size
    if not extrapolated(g * (m.recommended + 1), fewest, adaptive=adaptive):
        return  # every figure the recommendation rests on is observed
    bounds: dict[tuple[int, float], float] = {}

    def gain(k: int, sign: float) -> float:
        """One end of the interval of the gain from G*k to G*(k+1)."""
        if (k, sign) not in bounds:
            if extrapolated(g * (k + 1), fewest, adaptive=adaptive):
                bounds[k, sign] = gain_bound(model, g * k, g * (k + 1), sign)
            else:  # both ends observed: the data's own figure
                bounds[k, sign] = curve[k + 1] - curve[k]
        return bounds[k, sign]

    low, high = multiplier_range(
        lambda k: gain(k, -1.0), lambda k: gain(k, 1.0), MAX_MULTIPLIER, MULTIPLIER_MIN_GAIN
    )
    low, high = min(low, m.recommended), max(high, m.recommended)
    m.recommended_range = {"low": low, "high": high}
    k = m.recommended
    m.next_gain_interval = {"low": gain(k, -1.0), "high": gain(k, 1.0)}
    big = mixed_share_interval(model, m.recommended_group_size, fewest, adaptive=adaptive)
    m.recommended_open_interval = big.to_dict() if big is not None else None
    if low != high:
        m.decided = False
        m.remedy = remedy_of(m, all_same, adaptive=adaptive)
        m.reason = undecided_text(m)


def remedy_rollouts(m: ComputeMultiplier) -> int:
    """Rollouts per prompt that would pin the tails enough to choose among the allowed
    multipliers: one group beyond the largest of them (whether a prompt opens groups
    that large depends on pass rates near 1/M, which M rollouts begin to see)."""
    high = m.recommended_range["high"] if m.recommended_range else m.recommended
    return m.group_size * (high + 1)


def remedy_of(m: ComputeMultiplier, all_same: int, *, adaptive: bool) -> dict[str, int]:
    """The remedy an undecided multiplier prints: deepen a random REMEDY_PROMPTS of the
    `all_same` prompts (all of them when fewer) to `remedy_rollouts`; an adaptive run
    raises its cap instead (its all-same prompts draw up to it), and a run with no
    all-same prompt takes more rollouts for every prompt."""
    to = remedy_rollouts(m)
    if adaptive:
        return {"max_runs": to}
    if all_same <= 0:
        return {"runs": to}
    return {"deepen": min(all_same, REMEDY_PROMPTS), "to": to}


def remedy_text(m: ComputeMultiplier) -> str:
    """The remedy as a command to type (the one text of it: the report's reason, its
    terminal lines and the Markdown all come from here)."""
    r = m.remedy or {"runs": remedy_rollouts(m)}
    if "deepen" in r:
        return f"the same curate eval with --deepen {r['deepen']} --to {r['to']}"
    if "max_runs" in r:
        return f"the same curate eval --adaptive with --max-rollouts {r['max_runs']}"
    return f"the same curate eval again with -n {r['runs']}"


def deepened_note(extra: Mapping[str, Any]) -> str | None:
    """The report's one line on a deepened run (`curate eval --deepen`; None for any
    other): what the extra rollouts are and which figures use them. `extra` is the
    summary's `extra` (its `deepened` section)."""
    d = extra.get("deepened")
    if not d:
        return None
    n = d["nominal_runs"]
    return (
        f"deepened run: {d['prompts']:,} all-same prompts have up to {d['max_rollouts']} "
        f"rollouts ({d['rollouts']:,} more); the pass-rate prior, and so every figure past "
        f"G = {n} and the multiplier, use them; every other figure reads the first {n} "
        "rollouts of every prompt"
    )


def undecided_text(m: ComputeMultiplier) -> str:
    """The one line that says the data cannot choose the multiplier, and the remedy."""
    rng = m.recommended_range or {"low": m.recommended, "high": m.recommended}
    r = m.remedy or {}
    what = (
        f"more rollouts for a random {r['deepen']} of the prompts never (or always) solved"
        if "deepen" in r
        else "more rollouts per prompt"
    )
    return (
        f"the data cannot choose the multiplier: anything from {rng['low']}x to "
        f"{rng['high']}x fits it (95%), because prompts never (or always) solved so far "
        f"could have any pass rate near 0 (or 1); remedy: {what} pin those tails "
        f"({remedy_text(m)})"
    )


def _as_dict(interval: Interval | None) -> dict[str, float] | None:
    return None if interval is None else interval.to_dict()


def top_errors(errors: pl.Series | None, limit: int = TOP_ERRORS) -> list[dict[str, Any]]:
    """The `limit` most frequent error messages: [{"error": text, "count": n}], most
    frequent first (ties by text, so the order does not depend on the rows')."""
    if errors is None:
        return []
    texts = errors.drop_nulls()
    if texts.len() == 0:
        return []
    counts = texts.value_counts(name="count").sort(["count", texts.name], descending=[True, False])
    return [{"error": str(e), "count": int(n)} for e, n in counts.head(limit).rows()]


def group_breakdown(per_sample: pl.DataFrame) -> list[dict[str, Any]]:
    """Per value of the `group` column: samples, mean_score, high_variance_fraction,
    expected_open_fraction (the mean `gate_open_probability`, the headline's estimator)
    and errors; most samples first. Empty without a `group` column."""
    import polars as pl

    if GROUP not in per_sample.columns:
        return []
    weighted = with_multiplicity(per_sample)
    w = pl.col(MULTIPLICITY)
    scored_w = pl.when(pl.col("n_rollouts") > 0).then(w).otherwise(0)
    table = (
        weighted.group_by(GROUP)
        .agg(
            scored_w.sum().alias("samples"),
            ((pl.col("mean_score") * scored_w).sum() / scored_w.sum()).alias("mean_score"),
            ((pl.col("category") == "high_variance").cast(pl.Int64) * scored_w).sum().alias("hv"),
            ((pl.col("gate_open_probability") * scored_w).sum() / scored_w.sum()).alias("open"),
            (pl.col("n_errors") * w).sum().alias("errors"),
        )
        .sort(["samples", GROUP], descending=[True, False], nulls_last=True)
    )
    out = []
    for group, samples, mean, hv, open_, errors in table.rows():
        samples = int(samples)
        out.append(
            {
                "group": group,
                "samples": samples,
                "mean_score": mean if samples else None,
                "high_variance_fraction": hv / samples if samples else 0.0,
                "expected_open_fraction": open_ if samples else 0.0,
                "errors": int(errors or 0),
            }
        )
    return out


def summarize(
    per_sample: pl.DataFrame,
    *,
    prior: Prior,
    threshold: float,
    group_size: int,
    binary: bool,
    adaptive: bool = False,
    model: ScoreModel | None = None,
    nominal_runs: int | None = None,
) -> DatasetSummary:
    """The data-set summary that `curate report` prints and gates on. `model` as for
    `gate_curve`; the headline mixed share is the multiplier curve's value at G.

    `adaptive`: the run stopped samples once mixed; with 0/1 scores its population
    figures are then model-based at `nominal_runs` (default: the most rollouts any
    sample has), see `curate.stats.adaptive`."""
    import polars as pl

    weighted = with_multiplicity(per_sample)
    w = pl.col(MULTIPLICITY)
    scored = weighted.filter(pl.col("n_rollouts") > 0)
    totals = weighted.select(
        w.sum().alias("samples"),
        (pl.col("n_rollouts") * w).sum().alias("scored"),
        (pl.col("n_errors") * w).sum().alias("errors"),
    ).row(0, named=True)
    errors = int(totals["errors"] or 0)
    rollouts = int(totals["scored"] or 0) + errors
    counts: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    for name, count in scored.group_by("category").agg(w.sum()).rows():
        counts[name] = int(count)
    means = scored.select(
        w.sum().alias("samples"),
        ((pl.col("mean_score") * w).sum() / w.sum()).alias("mean"),
        ((pl.col("best_score") * w).sum() / w.sum()).alias("best"),
        pl.col("n_rollouts").min().alias("n_min"),
        pl.col("n_rollouts").max().alias("n_max"),
    ).row(0, named=True)
    samples = int(means["samples"] or 0)
    if samples == 0:  # 0/0 above: nothing to average
        means.update(mean=None, best=None)
    means["n_median"] = _weighted_median(scored, "n_rollouts")
    mean_score, best_of_n = means["mean"], means["best"]
    gain = best_of_n - mean_score if samples else None
    relative = gain / mean_score if gain is not None and mean_score else None
    hv_fraction = counts["high_variance"] / samples if samples else 0.0
    # An adaptive run stops drawing a sample once it is mixed, so the samples with
    # more than the smallest N are a biased subset: keep k within every sample's N.
    min_n = int(means["n_min"] or 0)
    passk = pass_at_k_table(per_sample, list(range(1, min_n + 1)) if adaptive and min_n else None)
    pass_k = {str(k): v for k, v, _ in passk.rows()}
    # -- adaptive runs: figures calibrated under the stopping rule --------
    # Raw rates of samples stopped once mixed are biased; every population figure is
    # replaced by its model-based value (curate.stats.adaptive), named in `model_based`.
    open_fractions: dict[int, float] | None = None
    model_extra: dict[str, Any] = {}
    if adaptive and binary and samples:
        fig = adaptive_stats.adaptive_figures(
            pair_histogram(scored),
            prior,
            nominal_runs=nominal_runs or int(means["n_max"]),
            group_size=group_size,
            threshold=threshold,
            group_sizes=[group_size * m for m in range(1, MAX_MULTIPLIER + 2)],
        )
        mean_score, best_of_n, hv_fraction = (
            fig.mean_score,
            fig.best_of_n,
            fig.high_variance_fraction,
        )
        gain = best_of_n - mean_score
        relative = gain / mean_score if mean_score else None
        pass_k = {str(k): v for k, v in fig.pass_at_k.items()}
        open_fractions = fig.open_fractions
        model_extra = {
            "model_based": list(adaptive_stats.MODEL_BASED),
            "estimator": adaptive_stats.ESTIMATOR,
            "nominal_runs": fig.nominal_runs,
        }
    # -- end adaptive -------------------------------------------------------------
    multiplier = compute_multiplier(
        per_sample,
        group_size,
        hv_fraction,
        prior=prior,
        binary=binary,
        model=model,
        open_fractions=open_fractions,
    )
    summary = DatasetSummary(
        samples=samples,
        unscored_samples=int(totals["samples"] or 0) - samples,
        rollouts=rollouts,
        errors=errors,
        error_rate=errors / rollouts if rollouts else 0.0,
        mean_score=mean_score,
        best_of_n=best_of_n,
        potential_gain=gain,
        relative_gain=relative,
        high_variance_fraction=hv_fraction,
        threshold=threshold,
        categories=counts,
        pass_at_k=pass_k,
        # The multiplier's own value at G: one number for one label, wherever it is shown.
        gate={
            "group_size": group_size,
            "expected_open_fraction": multiplier.expected_open_fraction,
            "interval": _as_dict(
                mixed_share_interval(
                    model if model is not None else ScoreModel.binary(prior),
                    group_size,
                    int(means["n_min"] or 0),
                    adaptive=open_fractions is not None,
                )
            ),
        },
        compute_multiplier=multiplier,
        rollouts_per_sample={
            "min": int(means["n_min"] or 0),
            "max": int(means["n_max"] or 0),
            "median": float(means["n_median"] or 0),
        },
        binary_scores=binary,
        prior=prior.summary(),
        by_group=group_breakdown(per_sample),
        extra=model_extra,
    )
    summary.warnings = _warnings(summary, scored, adaptive=adaptive)
    return summary


def _warnings(s: DatasetSummary, scored: pl.DataFrame, *, adaptive: bool) -> list[str]:
    import polars as pl

    out: list[str] = []
    if s.samples == 0:
        return ["no sample has a scored rollout"]
    if s.high_variance_fraction < LOW_SIGNAL_SHARE:
        out.append(
            f"only {s.high_variance_fraction:.1%} of samples are high-variance (under 10%): "
            "the data set may be too easy or too hard for this model"
        )
    if s.potential_gain is not None and s.potential_gain < CONSISTENT_GAIN:
        out.append(
            f"best-of-N ({s.best_of_n:.3f}) is close to the mean ({s.mean_score:.3f}): the model "
            "is very consistent, so RL has little room to improve"
        )
    w = pl.col(MULTIPLICITY)
    total_var = float(scored.select((pl.col("variance") * w).sum()).item())
    if s.high_variance_fraction >= LOW_SIGNAL_SHARE and total_var > 0:
        top_var = _top_sum(scored, "variance", max(1, s.samples // 10))
        if top_var / total_var >= 0.9:
            out.append(
                f"variance is concentrated: the top 10% of samples carry {top_var / total_var:.0%} "
                "of it, so most samples offer no learning signal"
            )
    few = int(scored.filter(pl.col("n_rollouts") < MIN_RUNS)[MULTIPLICITY].sum())
    if few:
        out.append(
            f"{few} sample(s) have fewer than {MIN_RUNS} scored rollouts: "
            "their variance is unreliable"
        )
    lo, hi = s.rollouts_per_sample["min"], s.rollouts_per_sample["max"]
    if lo != hi:
        if adaptive:
            out.append(
                f"adaptive run: rollout counts range {lo}-{hi}, so pass@k and variance come "
                "from unequal N"
            )
        else:
            out.append(f"ragged rollout counts: {lo} to {hi} scored rollouts per sample")
    if s.errors:
        out.append(
            f"{s.errors} rollout(s) failed ({s.error_rate:.1%}); "
            "they are excluded from every statistic"
        )
    if s.unscored_samples:
        out.append(f"{s.unscored_samples} sample(s) have no scored rollout (every attempt failed)")
    if s.samples < SMALL_DATASET:
        out.append(f"only {s.samples} samples: estimates at this size are noisy")
    return out


def _weighted_median(frame: pl.DataFrame, column: str) -> float | None:
    """Median of `column` over samples (rows weighted by multiplicity), as polars'
    median: the mean of the two middle values when the count is even."""
    import polars as pl

    hist = frame.group_by(column).agg(pl.col(MULTIPLICITY).sum()).sort(column).rows()
    total = sum(int(count) for _, count in hist)
    if total == 0:
        return None
    lower, upper = (total - 1) // 2, total // 2  # 0-based ranks of the middle values
    found: list[float] = []
    seen = 0
    for value, count in hist:
        seen += int(count)
        while len(found) < 2 and seen > (lower, upper)[len(found)]:
            found.append(float(value))
    return (found[0] + found[1]) / 2


def _top_sum(frame: pl.DataFrame, column: str, top: int) -> float:
    """Sum of the `top` largest values of `column` over samples (rows weighted by
    multiplicity)."""
    import polars as pl

    if frame.select((pl.col(MULTIPLICITY) == 1).all()).item():
        return float(frame[column].top_k(top).sum())  # one row per sample: no weights
    total, left = 0.0, top
    ordered = frame.group_by(column).agg(pl.col(MULTIPLICITY).sum()).sort(column, descending=True)
    for value, count in ordered.rows():
        take = min(left, int(count))
        total += take * float(value)
        left -= take
        if left == 0:
            break
    return total
