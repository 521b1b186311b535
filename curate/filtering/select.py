"""Choose the samples to train on, and join them back to their original fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from curate.core.outcome import CATEGORIES
from curate.errors import InputError, UsageError
from curate.exports.columns import free_name
from curate.stats.columns import STAT_COLUMNS
from curate.stats.compare import SETS, TRANSITIONS, transition_name

# Names users type (dashes) -> the categories they select.
KEEP_CHOICES: dict[str, tuple[str, ...]] = {
    "high-variance": ("high_variance",),
    "low-variance": ("low_variance",),
    "always-correct": ("always_correct",),
    "always-incorrect": ("always_incorrect",),
    "mixed": ("high_variance", "low_variance"),
    "all": CATEGORIES,
}
# `--keep` names that select by comparison with an earlier run (`--against`): the named
# sets of `curate.stats.compare` and the nine outcome transitions (incorrect-to-mixed, ...).
COMPARE_CHOICES: tuple[str, ...] = (
    *(name.replace("_", "-") for name in SETS),
    *(transition_name(a, b) for a, b in TRANSITIONS),
)
# The column of the per-sample frame holding a sample's transition name (null: the sample
# is not in the --against run), beside one boolean column per named set.
TRANSITION = "transition"
NOT_IN_AGAINST = "not scored in the --against run"


# --suspects: what to do with suspect labels (curate.stats.suspects).
SUSPECT_CHOICES = ("keep", "drop", "only")
# The drop reasons --suspects writes into the rejects.
SUSPECT_REASON = "suspect_label"
NOT_SUSPECT_REASON = "not a suspect label"


@dataclass(frozen=True)
class FilterSpec:
    keep: frozenset[str] = field(default_factory=lambda: frozenset({"high_variance"}))
    pass_rate: tuple[float, float] | None = None
    # The rate --pass-rate bounds: the raw c/n, or on an adaptive run the posterior mean
    # (a sample stopped once mixed has a c/n biased toward 1/2).
    rate_column: str = "pass_rate"
    # keep: ignore suspect labels; drop: drop them; only: drop every other sample.
    # drop and only need a boolean `suspect_label` column in the per-sample frame.
    suspects: str = "keep"
    # --against: comparison names (COMPARE_CHOICES, dashes) kept besides `keep`'s
    # categories; they need the TRANSITION and set columns in the per-sample frame.
    compare: frozenset[str] = frozenset()


def parse_suspects(value: str) -> str:
    """A --suspects value (keep, drop or only), case-insensitive."""
    key = value.strip().lower()
    if key not in SUSPECT_CHOICES:
        raise UsageError(
            f"unknown --suspects value '{value}' (choose from {', '.join(SUSPECT_CHOICES)})"
        )
    return key


def parse_keep(values: list[str]) -> frozenset[str]:
    cats: set[str] = set()
    for value in values:
        key = value.strip().lower().replace("_", "-")
        if key not in KEEP_CHOICES:
            raise UsageError(
                f"unknown --keep value '{value}' (choose from {', '.join(KEEP_CHOICES)})"
            )
        cats.update(KEEP_CHOICES[key])
    return frozenset(cats)


def split_keep(values: list[str], *, against: bool) -> tuple[frozenset[str], frozenset[str]]:
    """--keep values -> (categories, comparison names). Comparison names (learned,
    forgotten, newly-learnable, still-unreachable, incorrect-to-mixed, ...) need an
    earlier run to compare with (`against`)."""
    compare: set[str] = set()
    plain: list[str] = []
    for value in values:
        key = value.strip().lower().replace("_", "-")
        if key in COMPARE_CHOICES:
            if not against:
                raise UsageError(
                    f"--keep {key} compares two runs: name the earlier one with --against RUN"
                )
            compare.add(key)
        elif key in KEEP_CHOICES:
            plain.append(key)
        else:
            choices = [*KEEP_CHOICES, *(COMPARE_CHOICES if against else ())]
            raise UsageError(f"unknown --keep value '{value}' (choose from {', '.join(choices)})")
    return parse_keep(plain), frozenset(compare)


def parse_range(text: str) -> tuple[float, float]:
    """'LO:HI' -> (lo, hi), both within [0, 1] and lo <= hi."""
    try:
        lo_s, hi_s = text.split(":")
        lo = float(lo_s) if lo_s.strip() else 0.0
        hi = float(hi_s) if hi_s.strip() else 1.0
    except ValueError:
        raise UsageError(f"--pass-rate wants LO:HI, e.g. 0.1:0.9 (got '{text}')") from None
    if not (0.0 <= lo <= hi <= 1.0):
        raise UsageError(f"--pass-rate bounds must satisfy 0 <= LO <= HI <= 1 (got '{text}')")
    return lo, hi


def decide(per_sample: pl.DataFrame, spec: FilterSpec) -> pl.DataFrame:
    """Per-sample statistics plus `kept` and `drop_reason` (null when kept)."""
    cat = pl.col("category")
    reason: Any = pl.when(pl.col("n_rollouts") == 0).then(pl.lit("no scored rollouts"))
    # Suspect labels first: the rejects should say "check the reference" rather than
    # "always incorrect", which most of them also are.
    if spec.suspects == "drop":
        reason = reason.when(pl.col("suspect_label")).then(pl.lit(SUSPECT_REASON))
    elif spec.suspects == "only":
        reason = reason.when(~pl.col("suspect_label")).then(pl.lit(NOT_SUSPECT_REASON))
    if spec.compare:
        # Kept when its category or any comparison name matches (--keep is a union).
        picked = cat.is_in(sorted(spec.keep)) | pl.col(TRANSITION).is_in(sorted(spec.compare))
        for name in spec.compare:
            column = name.replace("-", "_")
            if column in SETS:
                picked = picked | pl.col(column).fill_null(False)
        reason = reason.when(pl.col(TRANSITION).is_null() & ~cat.is_in(sorted(spec.keep))).then(
            pl.lit(NOT_IN_AGAINST)
        )
        reason = reason.when(~picked).then(pl.col(TRANSITION))
    else:
        reason = reason.when(~cat.is_in(sorted(spec.keep))).then(cat)
    if spec.pass_rate is not None:
        lo, hi = spec.pass_rate
        rate = pl.col(spec.rate_column)
        reason = reason.when((rate < lo) | (rate > hi)).then(
            pl.format(
                f"{spec.rate_column} {{}} outside [{{}}, {{}}]",
                rate.round(4),
                pl.lit(lo),
                pl.lit(hi),
            )
        )
    return per_sample.with_columns(reason.otherwise(None).alias("drop_reason")).with_columns(
        pl.col("drop_reason").is_null().alias("kept")
    )


def stat_collisions(columns: list[str]) -> dict[str, str]:
    """Input column -> the name it is kept under, for input columns whose names the
    statistics take (an export read back as samples has `pass_rate` and the rest)."""
    ours = (*STAT_COLUMNS, "drop_reason", "kept")
    taken = set(columns) | set(ours)
    renames: dict[str, str] = {}
    for column in columns:
        if column in ours:
            renames[column] = free_name(column, taken)
            taken.add(renames[column])
    return renames


def attach_fields(
    decisions: pl.DataFrame,
    samples: pl.DataFrame | None,
    *,
    id_field: str = "sample_id",
    source: object = None,
) -> pl.DataFrame:
    """Original sample fields (in file order) followed by the statistics columns; an
    input column named like a statistic is kept as `input_NAME` (`stat_collisions`)."""
    stats = decisions.select("sample_id", *STAT_COLUMNS, "drop_reason", "kept")
    if samples is None:
        return stats.sort("sample_id")
    if id_field not in samples.columns:
        raise InputError(
            f"no '{id_field}' column to match sample ids (have: {', '.join(samples.columns)})",
            path=source,
        )
    original = samples.with_columns(pl.col(id_field).cast(pl.String).alias("_join_id"))
    if original["_join_id"].is_duplicated().any():
        raise InputError(f"'{id_field}' has duplicate values", path=source)
    original = original.rename(stat_collisions(original.columns))
    joined = original.join(
        stats.rename({"sample_id": "_join_id"}), on="_join_id", how="inner", maintain_order="left"
    )
    if id_field != "sample_id" and "sample_id" not in joined.columns:
        joined = joined.rename({"_join_id": "sample_id"})
    else:
        joined = joined.drop("_join_id")
    return joined
