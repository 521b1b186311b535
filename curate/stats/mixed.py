"""The mixed-group estimator: the chance that a training group of G rollouts teaches
something.

GRPO's advantage r_i - mean(r) (standardised or not) is zero for every member of a group
exactly when the group's rewards are all equal, so a group is informative ("mixed") when
its rewards are not all equal. That holds for any score, 0/1 or partial credit.

`mixed_probability` is the one estimator of P(a group of G is mixed) for one sample,
from the count of each distinct score the sample has shown. Every mixed-group figure
curate prints averages it over samples: the report's headline, the per-sample
`gate_open_probability`, the gate curve and its plot, the compute multiplier and the
by-group breakdown.

For a sample with n scored rollouts, n_v of them scoring exactly v:

- G <= 1: 0 (a group of one is never mixed).
- n >= G: 1 - sum_v C(n_v, G) / C(n, G). Drawing G of the n observed rollouts without
  replacement: an unbiased estimate of the chance for G fresh draws.
- n < G: 1 - sum_v E[r_v^G | n_v, n], the posterior predictive. r_v is the sample's rate
  of scoring exactly v, with an empirical-Bayes prior fitted per value over the data set:
  the NPMLE of `curate.stats.prior` on the pairs (n, n_v) of every sample, zeros
  included (n_v given n is binomial in r_v, so the per-value fit is the pass-rate fit
  with "scored exactly v" in place of "passed"). The sum runs over every value seen
  anywhere in the data set: a value this sample has not shown keeps its prior mass.
  Values beyond the `MAX_VALUES` most frequent share one prior.

Partial credit is modelled one value at a time: each value's prior is the marginal of
that value's rate, which is all E[r_v^G] needs, so the joint distribution of the rates
never has to be assumed. A judge that gives some prompts 0.5 every time shows up as an
atom at 1 in the prior of 0.5's rate, and those prompts are not mixed at any G.

With 0/1 scores the n < G branch is the posterior predictive 1 - E[p^G] - E[(1-p)^G]
on the pass rate (the prior of 0's rate is the mirror image of the pass-rate prior).
Averaged over samples it is calibrated when the prior fits the population; the plug-in
1 - p~^G - (1 - p~)^G on a smoothed pass rate is not (Jensen's inequality), and it
ignores partial credit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from curate.stats.estimators import choose_ratio
from curate.stats.multiplicity import MULTIPLICITY, pair_histogram, with_multiplicity
from curate.stats.prior import fit_prior_counts

if TYPE_CHECKING:
    import polars as pl

    from curate.stats.prior import Prior

# What the estimator needs of one sample: (n, ((value index, count), ...) for the
# modelled values it has shown, (count, ...) for the pooled rare values it has shown).
Signature: TypeAlias = tuple[int, tuple[tuple[int, int], ...], tuple[int, ...]]

# Values with a prior of their own; rarer ones (continuous scores) share one. Each prior
# is one small fit, and a rare value's chance of filling a whole group is tiny anyway.
MAX_VALUES = 32


def mixed_label(group_size: int) -> str:
    """The one label of the expected mixed-group share, wherever it is shown (report
    table, Markdown, multiplier lines, gate plot)."""
    return f"mixed groups at G={group_size}"


@dataclass(frozen=True)
class ScoreModel:
    """Per-value priors on each sample's rate of scoring exactly that value, and
    (partial credit) every sample's value counts as a `Signature`.

    `values[i]` has prior `priors[i]`; `rare_values` more values share the prior `rare`.
    `signatures` and `index` (sample_id -> signature number) are empty for 0/1 scores,
    where (n_rollouts, successes) of the per-sample frame say everything.
    """

    values: tuple[float, ...]
    priors: tuple[Prior, ...]
    rare: Prior | None = None
    rare_values: int = 0
    signatures: tuple[Signature, ...] = ()
    index: pl.DataFrame | None = field(default=None, repr=False, compare=False)

    @classmethod
    def binary(cls, prior: Prior) -> ScoreModel:
        """0/1 scores: the pass-rate prior for 1, its mirror image for 0."""
        return cls(values=(0.0, 1.0), priors=(prior.mirror(), prior))

    @property
    def is_binary(self) -> bool:
        return self.index is None


def binary_signature(n: int, c: int) -> Signature:
    """The signature of a 0/1 sample with c passes in n (for `ScoreModel.binary`)."""
    return (n, tuple((i, k) for i, k in ((0, n - c), (1, c)) if k > 0), ())


def mixed_probability(model: ScoreModel, signature: Signature, group_size: int) -> float:
    """P(a group of `group_size` rollouts of this sample has rewards not all equal): the
    one estimator behind every mixed-group figure (definition in the module docstring)."""
    n, counts, rare = signature
    if group_size <= 1 or n <= 0:
        return 0.0
    if n >= group_size:
        same = sum(choose_ratio(c, n, group_size) for _, c in counts)
        same += sum(choose_ratio(c, n, group_size) for c in rare)
    else:
        seen = dict(counts)
        same = sum(p.post_moment(n, seen.get(i, 0), group_size) for i, p in enumerate(model.priors))
        if model.rare is not None:
            pooled = model.rare
            same += sum(pooled.post_moment(n, c, group_size) for c in rare)
            same += (model.rare_values - len(rare)) * pooled.post_moment(n, 0, group_size)
    return min(1.0, max(0.0, 1.0 - same))


def mixed_curve(
    model: ScoreModel, histogram: Iterable[tuple[Signature, int]], group_sizes: Iterable[int]
) -> list[float]:
    """The sample-weighted mean of `mixed_probability` at each group size (0 without
    samples), over (signature, samples) pairs."""
    rows = list(histogram)
    total = sum(w for _, w in rows)
    return [
        sum(w * mixed_probability(model, sig, g) for sig, w in rows) / total if total else 0.0
        for g in group_sizes
    ]


def signature_histogram(model: ScoreModel, per_sample: pl.DataFrame) -> list[tuple[Signature, int]]:
    """(signature, samples) over the scored samples of `per_sample` (rows weighted by
    their multiplicity in a compressed frame), in a fixed order."""
    import polars as pl

    scored = with_multiplicity(per_sample.filter(pl.col("n_rollouts") > 0))
    if model.index is None:
        return [(binary_signature(n, c), w) for n, c, w in pair_histogram(scored)]
    if "sample_id" not in scored.columns:
        raise ValueError("partial-credit statistics need the sample_id of each row")
    weights = (
        scored.select("sample_id", MULTIPLICITY)
        .join(model.index, on="sample_id", how="inner")
        .group_by("signature")
        .agg(pl.col(MULTIPLICITY).sum())
        .sort("signature")
    )
    return [(model.signatures[int(i)], int(w)) for i, w in weights.rows()]


def sample_probabilities(model: ScoreModel, group_size: int) -> pl.DataFrame:
    """(sample_id, gate_open_probability) of every partial-credit sample in the model."""
    import polars as pl

    assert model.index is not None
    table = pl.DataFrame(
        {
            "signature": range(len(model.signatures)),
            "gate_open_probability": [
                mixed_probability(model, sig, group_size) for sig in model.signatures
            ],
        },
        schema={"signature": pl.Int64, "gate_open_probability": pl.Float64},
    )
    return model.index.join(table, on="signature", how="left").drop("signature")


def fit_score_model(rollouts: pl.DataFrame | pl.LazyFrame) -> ScoreModel:
    """The `ScoreModel` of partial-credit rollouts (sample_id, score; a null score, a
    failed rollout, is left out): one prior per frequent value, fitted over every
    sample, and each sample's signature."""
    import polars as pl

    counts = (
        rollouts.lazy()
        .filter(pl.col("score").is_not_null())
        .group_by("sample_id", "score")
        .len()
        .collect()
        .with_columns(pl.col("len").cast(pl.Int64))
    )
    # The most frequent values get priors of their own (ties broken by value, so the
    # model does not depend on row order); the rest are pooled.
    totals = (
        counts.group_by("score")
        .agg(pl.col("len").sum())
        .sort(["len", "score"], descending=[True, False])
    )
    modelled = sorted(totals["score"].head(MAX_VALUES).to_list())
    rare_values = max(0, totals.height - MAX_VALUES)
    slot = pl.DataFrame(
        {"score": modelled, "slot": range(len(modelled))},
        schema={"score": pl.Float64, "slot": pl.Int64},
    )
    counts = counts.join(slot, on="score", how="left").with_columns(pl.col("slot").fill_null(-1))
    per_n = (
        counts.group_by("sample_id")
        .agg(pl.col("len").sum().alias("n"), pl.col("slot"), pl.col("len").alias("counts"))
        .sort("sample_id")
    )
    n_of = per_n.select("sample_id", "n")
    samples_at = dict(n_of.group_by("n").len().rows())

    def histogram(pairs: pl.DataFrame, slots: int) -> list[tuple[int, int, int]]:
        """(n, count, samples) of one value (or `slots` pooled values), zeros included."""
        nonzero = pairs.group_by("n", "len").len(name="w").rows()
        seen = Counter[int]()
        for n, _, w in nonzero:
            seen[n] += w
        zeros = [(n, 0, slots * total - seen[n]) for n, total in samples_at.items()]
        return sorted([*nonzero, *(z for z in zeros if z[2] > 0)])

    with_n = counts.join(n_of, on="sample_id")
    priors = tuple(
        fit_prior_counts(histogram(with_n.filter(pl.col("slot") == i), 1))
        for i in range(len(modelled))
    )
    rare = None
    if rare_values:
        rare = fit_prior_counts(histogram(with_n.filter(pl.col("slot") == -1), rare_values))

    index: dict[Signature, int] = {}
    ids: list[int] = []
    for n, slots, lens in per_n.select("n", "slot", "counts").iter_rows():
        pairs = sorted((s, c) for s, c in zip(slots, lens, strict=True) if s >= 0)
        pooled = tuple(sorted(c for s, c in zip(slots, lens, strict=True) if s < 0))
        sig: Signature = (int(n), tuple(pairs), pooled)
        ids.append(index.setdefault(sig, len(index)))
    return ScoreModel(
        values=tuple(float(v) for v in modelled),
        priors=priors,
        rare=rare,
        rare_values=rare_values,
        signatures=tuple(index),
        index=pl.DataFrame(
            {"sample_id": per_n["sample_id"], "signature": ids},
            schema={"sample_id": pl.String, "signature": pl.Int64},
        ),
    )
