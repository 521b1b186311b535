"""Suspect labels: samples whose rollouts agree on one answer that the grader rejects.

When most of a sample's completions converge on the same extracted answer and every one
of them is graded wrong, either the model is confidently wrong or the reference is.
Self-consistency (majority voting over sampled answers) is a well-known signal of a
model's correct answers, and public benchmarks carry a measurable share of wrong labels
(GSM8K, MATH and MMLU audits found from under one to a few percent). So a sample where
a model agrees with itself on a rejected answer in at least `min_share` of at least
`min_n` scored rollouts is worth a look by a person: on such benchmarks it is wrong
reference more often than chance would give, but the rule proves nothing by itself. A
systematic model error (a common misconception, a trick question) looks exactly the
same, so the flag is a list to review, not a verdict.

Answers are compared after `normalised_answer`: whitespace collapsed, case folded, and a
plain number written the same way whatever its separators (see there). Nothing here reads
a file: `curate.analysis.suspects` reads the rows and calls `suspect_frame`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import polars as pl

DEFAULT_MIN_N: Final = 4
DEFAULT_MIN_SHARE: Final = 0.6
# The columns `suspect_frame` reads from each rollout row.
ANSWER_COLUMNS: Final = ("sample_id", "score", "error", "extracted")
# The per-sample frame's columns, in order.
SUSPECT_COLUMNS: Final = (
    "sample_id",
    "n_scored",
    "majority_answer",
    "majority_count",
    "majority_share",
    "majority_score",
    "suspect_label",
)

# A plain decimal number: an optional sign, digits (comma-grouped by threes, or not),
# an optional fraction. Anything else (units, %, fractions, LaTeX) stays text.
_PLAIN_NUMBER = r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$"
# Currency symbols the numeric grader keeps in what it extracted ("$1,000").
_CURRENCY = r"^[$€£¥₹]\s?"


def check_parameters(min_n: int, min_share: float) -> None:
    """ValueError unless min_n >= 1 and 0 < min_share <= 1."""
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        raise ValueError(f"min_n must be an integer >= 1, got {min_n!r}")
    if not 0.0 < min_share <= 1.0:
        raise ValueError(f"min_share must be in (0, 1], got {min_share!r}")


def normalised_answer(column: str = "extracted") -> pl.Expr:
    """`column` as an answer to compare: null (or empty) means no answer.

    Text: surrounding whitespace stripped, inner runs of whitespace collapsed to one
    space, case folded ("The Answer" == "the  answer"). A plain decimal number, after a
    leading currency sign is dropped, is written canonically: no thousands commas, no
    "+", no leading zeros, no trailing zeros of a fraction, "-0" is "0", and the Unicode
    minus is "-" ("$1,000", "1000.0" and "1000" are one answer). Percentages, fractions,
    units and expressions stay as written ("12%" is not "0.12", "3/4" is not "0.75"):
    merging those is the grader's call, and merging too much would make two different
    answers look like one majority.
    """
    import polars as pl

    text = (
        pl.col(column)
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
        .str.to_lowercase()
        .str.replace_all("\u2212", "-", literal=True)
    )
    bare = text.str.replace(_CURRENCY, "")
    number = (
        bare.str.replace_all(",", "", literal=True)
        .str.replace(r"^\+", "")
        # Trailing zeros of a fraction, then a bare point: 2.50 -> 2.5, 3.00 -> 3.
        .str.replace(r"(\.\d*?)0+$", "${1}")
        .str.replace(r"\.$", "")
        # Leading zeros: 007 -> 7, -0.5 stays, 0 stays.
        .str.replace(r"^(-?)0+(\d)", "${1}${2}")
        .str.replace(r"^-0$", "0")
    )
    answer = pl.when(bare.str.contains(_PLAIN_NUMBER)).then(number).otherwise(text)
    return pl.when(answer != "").then(answer).alias("answer")


# Answers `normalised_answer` leaves as they are: lower-case words without spaces, and
# integers written canonically. Most graded answers are one of these; skipping the
# regex passes for them makes normalising several times faster.
_ALREADY_NORMAL = r"^(0|-?[1-9][0-9]*|[a-z]+)$"


def normalise_answers(values: pl.Series) -> pl.Series:
    """`normalised_answer` of every value (String), named "answer"."""
    import polars as pl

    frame = values.cast(pl.String).rename("extracted").to_frame().with_row_index("_row")
    normal = pl.col("extracted").str.contains(_ALREADY_NORMAL).fill_null(False)
    done = frame.filter(normal).select("_row", pl.col("extracted").alias("answer"))
    rest = frame.filter(~normal).select("_row", normalised_answer())
    return pl.concat([done, rest]).sort("_row")["answer"]


def suspect_frame(
    rows: pl.DataFrame | pl.LazyFrame,
    *,
    min_n: int = DEFAULT_MIN_N,
    min_share: float = DEFAULT_MIN_SHARE,
) -> pl.DataFrame:
    """One row per sample of `rows` (sample_id, score, error, extracted: one rollout
    each, de-duplicated), in sample_id order:

        n_scored        scored rollouts (no error, a score)
        majority_answer the most common normalised answer among them (null: none had
                        one); ties go to the answer that sorts first, so the result does
                        not depend on row order
        majority_count  how many scored rollouts gave it
        majority_share  majority_count / n_scored (a rollout without an answer counts
                        in the denominator: it did not agree)
        majority_score  the mean score of the rollouts that gave it
        suspect_label   n_scored >= min_n, majority_share >= min_share, and every
                        rollout that gave the majority answer scored 0

    See the module docstring for why the rule points at wrong references.
    """
    import polars as pl

    check_parameters(min_n, min_share)
    is_scored = pl.col("error").is_null() & pl.col("score").is_not_null()
    lf = rows.lazy().select(ANSWER_COLUMNS)
    totals = lf.group_by("sample_id").agg(is_scored.sum().cast(pl.Int64).alias("n_scored"))
    # Count each sample's raw answers first and normalise only the distinct strings:
    # normalising is a few regex passes, far too slow over every row of a large run.
    raw = (
        lf.filter(is_scored & pl.col("extracted").is_not_null())
        .group_by("sample_id", "extracted")
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("score").sum().alias("total"))
        .collect()
    )
    distinct = raw["extracted"].unique()
    lookup = pl.DataFrame({"extracted": distinct, "answer": normalise_answers(distinct)})
    majority = (
        raw.lazy()
        .join(lookup.lazy(), on="extracted", how="left")
        .filter(pl.col("answer").is_not_null())
        .group_by("sample_id", "answer")
        .agg(pl.col("count").sum(), pl.col("total").sum())
        .sort(["sample_id", "count", "answer"], descending=[False, True, False])
        .unique("sample_id", keep="first", maintain_order=True)
        .select(
            "sample_id",
            pl.col("answer").alias("majority_answer"),
            pl.col("count").alias("majority_count"),
            (pl.col("total") / pl.col("count")).alias("majority_score"),
        )
    )
    share = pl.col("majority_count") / pl.col("n_scored")
    return (
        totals.join(majority, on="sample_id", how="left")
        .with_columns(share.alias("majority_share"))
        .with_columns(
            (
                (pl.col("n_scored") >= min_n)
                & (pl.col("majority_share") >= min_share)
                & (pl.col("majority_score") == 0.0)
            )
            .fill_null(False)
            .alias("suspect_label")
        )
        .select(SUSPECT_COLUMNS)
        .sort("sample_id")
        .collect()
    )
