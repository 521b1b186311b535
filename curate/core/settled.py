"""The resume rule: which stored rollouts a re-run leaves alone.

One rule, in two forms as `curate.core.outcome` has it: scalar (`is_settled`) for code
that sees one row at a time, and a polars expression (`settled_expr`) for frames (the
resume plan, `curate status`, the store's missing count).

A rollout is *settled* when a re-run would not change it: it holds a score, or its
error is one that recurs whenever the same request is made again. The failure's
producer knows which it is and says so in the store's `settled` column (a Boolean,
set on error rows only):

- settled (true): the reference cannot be graded (the pre-run reference check found
  it unusable: every completion of that sample is a grader error); the prompt does
  not fit the model's context (the local engine, or an endpoint's 400/413/422 for that
  prompt alone); a rollout cut short under `--truncated error` (its seed cuts it short
  again).
- retryable (false): everything else: timeouts, 5xx, a dead endpoint, a grader that
  crashed or timed out on one rollout. A re-run retries these, as it always has.

Shards written before the column existed read it as null: their error rows are
retryable, except the cut-short ones, which were never retried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from curate.core.reasoning import TRUNCATED_ERROR_PREFIX

if TYPE_CHECKING:
    import polars as pl

# The store column (Boolean; null on scored rows and on older shards).
SETTLED_COLUMN: Final = "settled"

# What a user reads for the two kinds of error row.
SETTLED_LABEL: Final = "settled"  # done, with an error that recurs on a re-run
RETRYABLE_LABEL: Final = "retryable"


def is_settled(error: str | None, settled: bool | None) -> bool:
    """Whether a re-run leaves this row alone: scored, or an error that recurs."""
    if error is None:
        return True
    if settled is None:  # an older shard: only cut-short rows were kept
        return error.startswith(TRUNCATED_ERROR_PREFIX)
    return settled


def settled_error_expr(error: str = "error", settled: str = SETTLED_COLUMN) -> pl.Expr:
    """True on error rows that recur (`is_settled` and not scored); never null."""
    import polars as pl

    err = pl.col(error)
    legacy = err.str.starts_with(TRUNCATED_ERROR_PREFIX)
    return (err.is_not_null() & pl.coalesce(pl.col(settled), legacy).fill_null(False)).fill_null(
        False
    )


def settled_expr(error: str = "error", settled: str = SETTLED_COLUMN) -> pl.Expr:
    """`is_settled` over a frame's `error` and `settled` columns; never null."""
    import polars as pl

    return pl.col(error).is_null() | settled_error_expr(error, settled)
