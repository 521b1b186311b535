"""Agreement between two graders of the same rollouts (`curate agree RUN RUN2`).

Rollouts are paired on (sample_id, rollout_idx); a pair counts when both graders scored it.
Pass/fail is full credit (`PASS_SCORE`), the rule of every pass rate. For the pairs:

* the 2x2 confusion table of pass/fail and Cohen's kappa, (p_o - p_e) / (1 - p_e) with
  p_e from each grader's own pass share (Cohen 1960); undefined (null) when p_e = 1;
* Spearman's rank correlation of the scores: Pearson's correlation of their average
  ranks (ties share a rank), the measure for continuous scores; null when either
  grader gives every pair the same score;
* per sample, the outcome (always correct / always incorrect / mixed, from
  `curate.core.outcome`) under each grader over its own scored rollouts, and the
  samples whose outcome changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from curate.core.outcome import OUTCOMES, PASS_SCORE, outcome_expr

KEYS = ("sample_id", "rollout_idx")


@dataclass(frozen=True, slots=True)
class OutcomeChange:
    sample_id: str
    before: str | None  # None: no scored rollout under that grader
    after: str | None


@dataclass
class Agreement:
    pairs: int  # rollouts both graders scored
    only_first: int  # scored by the first grader, an error under the second
    only_second: int
    neither: int  # an error under both (or missing from one run)
    binary: bool  # every paired score is 0 or 1 under both graders
    both_pass: int
    first_only_pass: int
    second_only_pass: int
    both_fail: int
    observed_agreement: float  # share of pairs with the same pass/fail
    kappa: float  # Cohen's kappa on pass/fail (NaN when undefined)
    spearman: float  # rank correlation of the scores (NaN when undefined)
    exact_agreement: float  # share of pairs with identical scores
    mean_first: float
    mean_second: float
    mean_abs_difference: float
    samples: int  # samples with a scored rollout under either grader
    outcome_table: dict[str, dict[str, int]] = field(default_factory=dict)
    changes: list[OutcomeChange] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "only_first": self.only_first,
            "only_second": self.only_second,
            "neither": self.neither,
            "binary_scores": self.binary,
            "confusion": {
                "both_pass": self.both_pass,
                "first_only_pass": self.first_only_pass,
                "second_only_pass": self.second_only_pass,
                "both_fail": self.both_fail,
            },
            "observed_agreement": self.observed_agreement,
            "cohen_kappa": self.kappa,
            "spearman": self.spearman,
            "exact_agreement": self.exact_agreement,
            "mean_score": {"first": self.mean_first, "second": self.mean_second},
            "mean_abs_difference": self.mean_abs_difference,
            "samples": self.samples,
            "outcomes": self.outcome_table,
            "changed_samples": [
                {"sample_id": c.sample_id, "first": c.before, "second": c.after}
                for c in self.changes
            ],
        }


def cohen_kappa(both: int, first_only: int, second_only: int, neither: int) -> float:
    """Cohen's kappa of a 2x2 table (counts of pass/pass, pass/fail, fail/pass,
    fail/fail); NaN when chance agreement is certain (both graders constant alike)."""
    n = both + first_only + second_only + neither
    if n == 0:
        return math.nan
    observed = (both + neither) / n
    first_pass = (both + first_only) / n
    second_pass = (both + second_only) / n
    expected = first_pass * second_pass + (1 - first_pass) * (1 - second_pass)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)


def spearman(first: pl.Series, second: pl.Series) -> float:
    """Spearman's rho (polars': Pearson's correlation of average ranks); NaN for fewer
    than two pairs or a constant side."""
    if first.len() < 2:
        return math.nan
    frame = pl.DataFrame({"a": first, "b": second})
    value = frame.select(pl.corr("a", "b", method="spearman")).item()
    return math.nan if value is None or not math.isfinite(value) else float(value)


def _outcomes(rows: pl.DataFrame) -> pl.DataFrame:
    """sample_id -> outcome over its scored rollouts (null: none scored)."""
    scored = rows.filter(pl.col("score").is_not_null() & pl.col("error").is_null())
    stats = scored.group_by("sample_id").agg(
        pl.len().alias("n_rollouts"),
        pl.col("score").max().alias("best_score"),
        pl.col("score").min().alias("worst_score"),
    )
    return stats.select("sample_id", outcome_expr().alias("outcome"))


def agreement(first: pl.DataFrame, second: pl.DataFrame) -> Agreement:
    """How two graders agree on the same rollouts. Both frames hold one row per
    (sample_id, rollout_idx) with `score` and `error` (a run directory's rollouts)."""
    cols = [*KEYS, "score", "error"]
    a = first.select(cols).with_columns(
        pl.when(pl.col("error").is_null()).then(pl.col("score")).alias("score")
    )
    b = second.select(cols).with_columns(
        pl.when(pl.col("error").is_null()).then(pl.col("score")).alias("score")
    )
    joined = a.join(b, on=list(KEYS), how="full", suffix="_2", coalesce=True)
    s1, s2 = pl.col("score"), pl.col("score_2")
    counts = joined.select(
        (s1.is_not_null() & s2.is_not_null()).sum().alias("pairs"),
        (s1.is_not_null() & s2.is_null()).sum().alias("only_first"),
        (s1.is_null() & s2.is_not_null()).sum().alias("only_second"),
        (s1.is_null() & s2.is_null()).sum().alias("neither"),
    ).row(0, named=True)
    paired = joined.filter(s1.is_not_null() & s2.is_not_null())
    p1, p2 = s1 >= PASS_SCORE, s2 >= PASS_SCORE
    table = paired.select(
        (p1 & p2).sum().alias("both"),
        (p1 & ~p2).sum().alias("first_only"),
        (~p1 & p2).sum().alias("second_only"),
        (~p1 & ~p2).sum().alias("neither"),
        s1.is_in([0.0, 1.0]).all().alias("binary_1"),
        s2.is_in([0.0, 1.0]).all().alias("binary_2"),
        (s1 == s2).mean().alias("exact"),
        s1.mean().alias("mean_1"),
        s2.mean().alias("mean_2"),
        (s1 - s2).abs().mean().alias("mad"),
    ).row(0, named=True)
    n = paired.height
    both, f_only, s_only, none_ = (
        int(table["both"] or 0),
        int(table["first_only"] or 0),
        int(table["second_only"] or 0),
        int(table["neither"] or 0),
    )

    def num(value: Any) -> float:
        return math.nan if value is None else float(value)

    o1 = _outcomes(first).rename({"outcome": "first"})
    o2 = _outcomes(second).rename({"outcome": "second"})
    outcomes = o1.join(o2, on="sample_id", how="full", coalesce=True).sort("sample_id")
    labels = [*OUTCOMES, "none"]
    grid = {x: dict.fromkeys(labels, 0) for x in labels}
    changes: list[OutcomeChange] = []
    for sid, x, y in outcomes.iter_rows():
        grid[x or "none"][y or "none"] += 1
        if x != y:
            changes.append(OutcomeChange(str(sid), x, y))
    return Agreement(
        pairs=int(counts["pairs"]),
        only_first=int(counts["only_first"]),
        only_second=int(counts["only_second"]),
        neither=int(counts["neither"]),
        binary=n > 0 and bool(table["binary_1"]) and bool(table["binary_2"]),
        both_pass=both,
        first_only_pass=f_only,
        second_only_pass=s_only,
        both_fail=none_,
        observed_agreement=(both + none_) / n if n else math.nan,
        kappa=cohen_kappa(both, f_only, s_only, none_),
        spearman=spearman(paired["score"], paired["score_2"]),
        exact_agreement=num(table["exact"]),
        mean_first=num(table["mean_1"]),
        mean_second=num(table["mean_2"]),
        mean_abs_difference=num(table["mad"]),
        samples=outcomes.height,
        outcome_table=grid,
        changes=changes,
    )
