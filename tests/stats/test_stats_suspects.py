"""Suspect labels: the per-sample majority answer and the flag (curate.stats.suspects)."""

from __future__ import annotations

import polars as pl
import pytest

from curate.stats.suspects import (
    SUSPECT_COLUMNS,
    normalise_answers,
    normalised_answer,
    suspect_frame,
)
from tests.report.suspect_run import MAJORITY, SUSPECTS, answer_rows


def rows(samples: dict[str, list[tuple[str | None, float | None]]]) -> pl.DataFrame:
    """{sample: [(extracted, score), ...]}; a None score is a failed rollout."""
    return pl.DataFrame(
        [
            (sid, score, "timeout" if score is None else None, answer)
            for sid, answers in samples.items()
            for answer, score in answers
        ],
        schema={
            "sample_id": pl.String,
            "score": pl.Float64,
            "error": pl.String,
            "extracted": pl.String,
        },
        orient="row",
    )


def flagged(frame: pl.DataFrame) -> list[str]:
    return frame.filter("suspect_label")["sample_id"].to_list()


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("1000", "1000"),
        ("1,000", "1000"),
        ("$1,000.00", "1000"),
        (" 1000.0 ", "1000"),
        ("+1000", "1000"),
        ("007", "7"),
        ("-0", "0"),
        ("0.0", "0"),
        ("2.50", "2.5"),
        ("-0.5", "-0.5"),
        ("\u22125", "-5"),
        ("The  Answer\n", "the answer"),
        ("PARIS", "paris"),
        # Left as written: the grader's call, not a spelling.
        ("12%", "12%"),
        ("3/4", "3/4"),
        ("1,00", "1,00"),
        ("1.0e5", "1.0e5"),
        ("", None),
        ("   ", None),
        (None, None),
    ],
)
def test_normalised_answer(raw: str | None, want: str | None) -> None:
    values = pl.Series("extracted", [raw], dtype=pl.String)
    assert values.to_frame().select(normalised_answer())["answer"][0] == want
    assert normalise_answers(values).to_list() == [want]  # the fast path agrees


def test_exactly_the_wrong_references_are_flagged() -> None:
    frame = suspect_frame(answer_rows())
    assert frame.columns == list(SUSPECT_COLUMNS)
    assert flagged(frame) == SUSPECTS
    for sid, (answer, share, n) in MAJORITY.items():
        row = frame.filter(pl.col("sample_id") == sid).row(0, named=True)
        assert (row["majority_answer"], row["n_scored"]) == (answer, n)
        assert row["majority_share"] == pytest.approx(share)
        assert row["majority_score"] == 0.0
    ok1 = frame.filter(pl.col("sample_id") == "ok1").row(0, named=True)
    assert (ok1["majority_answer"], ok1["majority_score"]) == ("7", 1.0)


def test_row_order_does_not_matter() -> None:
    data = answer_rows()
    shuffled = data.sample(fraction=1.0, shuffle=True, seed=3)
    assert suspect_frame(shuffled).equals(suspect_frame(data))


@pytest.mark.parametrize(
    ("answers", "is_suspect"),
    [
        ([("9", 0)] * 3 + [("1", 0), ("2", 0)], True),  # 3 of 5 = 60%: at the line
        ([("9", 0)] * 2 + [("1", 0), ("2", 0)], False),  # 50%
        ([("9", 0)] * 3, False),  # 3 scored < min_n 4
        ([("9", 0)] * 3 + [("9", None)] * 2, False),  # failed rollouts are not scored
        ([("9", 0)] * 4 + [("9", 1)], False),  # the majority answer was graded right once
        ([("9", 0.5)] * 5, False),  # partial credit: not graded wrong
        ([("9", 0)] * 3 + [(None, 0)] * 2, True),  # 3 of 5: no answer counts against
        ([("9", 0)] * 2 + [(None, 0)] * 3, False),  # 2 of 5
        ([(None, 0)] * 6, False),  # nothing extracted: no majority
    ],
)
def test_the_rule(answers: list[tuple[str | None, float | None]], is_suspect: bool) -> None:
    frame = suspect_frame(rows({"s": answers}))
    assert frame["suspect_label"].to_list() == [is_suspect]


def test_parameters_move_the_line() -> None:
    data = rows({"s": [("9", 0)] * 3 + [("1", 1)]})  # 3 of 4 scored
    assert flagged(suspect_frame(data)) == ["s"]
    assert flagged(suspect_frame(data, min_share=0.8)) == []
    assert flagged(suspect_frame(data, min_n=5)) == []
    assert flagged(suspect_frame(data, min_n=4, min_share=0.75)) == ["s"]


def test_every_sample_gets_a_row() -> None:
    frame = suspect_frame(rows({"b": [(None, None)] * 2, "a": [(None, 0)], "c": [("x", 1)]}))
    assert frame["sample_id"].to_list() == ["a", "b", "c"]
    assert frame["n_scored"].to_list() == [1, 0, 1]
    assert frame["majority_answer"].to_list() == [None, None, "x"]
    assert frame["majority_share"].to_list() == [None, None, 1.0]
    assert frame["suspect_label"].to_list() == [False, False, False]


def test_ties_go_to_the_answer_that_sorts_first() -> None:
    data = rows({"s": [("b", 0), ("a", 0), ("b", 0), ("a", 0)]})
    assert suspect_frame(data)["majority_answer"].to_list() == ["a"]


@pytest.mark.parametrize(("min_n", "min_share"), [(0, 0.6), (4, 0.0), (4, 1.5), (True, 0.6)])
def test_bad_parameters(min_n: int, min_share: float) -> None:
    with pytest.raises(ValueError):
        suspect_frame(answer_rows(), min_n=min_n, min_share=min_share)
