"""The resume rule in its two forms (scalar and polars) agrees on every kind of row."""

from __future__ import annotations

import itertools

import polars as pl

from curate.core.reasoning import TRUNCATED_ERROR_PREFIX
from curate.core.settled import SETTLED_COLUMN, is_settled, settled_error_expr, settled_expr

ERRORS = [None, "grader: reference is not a number", f"{TRUNCATED_ERROR_PREFIX}x", "timeout"]
FLAGS = [None, True, False]


def test_scalar_and_expression_agree_on_every_combination() -> None:
    rows = list(itertools.product(ERRORS, FLAGS))
    frame = pl.DataFrame(
        {"error": [e for e, _ in rows], SETTLED_COLUMN: [s for _, s in rows]},
        schema={"error": pl.String, SETTLED_COLUMN: pl.Boolean},
    )
    got = frame.select(settled_expr().alias("s"), settled_error_expr().alias("e"))
    assert got["s"].null_count() == 0 and got["e"].null_count() == 0
    assert got["s"].to_list() == [is_settled(e, s) for e, s in rows]
    assert got["e"].to_list() == [e is not None and is_settled(e, s) for e, s in rows]


def test_the_flag_decides_and_older_rows_are_retryable_except_cut_short_ones() -> None:
    assert is_settled(None, None)  # scored
    assert is_settled("timeout", True) and not is_settled("timeout", False)
    assert not is_settled("timeout", None)  # a shard written before the column
    assert is_settled(f"{TRUNCATED_ERROR_PREFIX}stopped", None)  # never retried before either
    assert not is_settled(f"{TRUNCATED_ERROR_PREFIX}stopped", False)  # the flag wins
