"""A weight table given to `curate filter --weights FILE`, checked against the kept samples.

A trainer reads a missing weight as null (or NaN), which silently drops the sample
from a weighted loss or breaks it, so every kept sample needs a weight: from the
table, or from an explicit `--weight-default`. Every weight in the table must be a
finite number >= 0, and a sample listed twice must have the same weight both times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from curate.errors import InputError, UsageError
from curate.exports.prepare import WEIGHTS_ID as ID_COLUMN
from curate.exports.prepare import WEIGHTS_VALUE as WEIGHT_COLUMN
from curate.exports.prepare import require_weight_columns

if TYPE_CHECKING:
    import polars as pl

SHOW_IDS = 5  # how many sample ids a message names before "..."


@dataclass(frozen=True)
class TableWeights:
    """The checked table: one (sample_id, weight) row per listed or filled sample."""

    frame: pl.DataFrame
    filled: int  # kept samples the table lacked, given the default weight


def check_weight_default(default: float | None, *, table: bool, given: bool) -> None:
    """UsageError unless `default` is unset, or a finite number >= 0 filling a table.

    `table`: --weights names a table (not an objective); `given`: --weights was passed.
    """
    if default is None:
        return
    if not given:
        raise UsageError("--weight-default fills gaps in a --weights table; pass --weights FILE")
    if not table:
        raise UsageError(
            "--weight-default fills gaps in a --weights table; an objective "
            "(linear|log|sqrt|arcsin|std) already weighs every kept sample"
        )
    if not math.isfinite(default) or default < 0:
        raise UsageError(f"--weight-default must be a finite number >= 0 (got {default})")


def table_weights(
    table: pl.DataFrame,
    kept_ids: Sequence[str],
    *,
    default: float | None = None,
    source: object = None,
) -> TableWeights:
    """Check `table` (columns sample_id, weight) and cover every id in `kept_ids`.

    Raises InputError (naming `source`) for a missing column, a weight that is not a
    finite number >= 0, a sample given different weights, or, without `default`,
    kept samples the table lacks; with `default`, those get it.
    """
    import polars as pl

    require_weight_columns(table, source=source)  # the same rule as every export's
    if table[ID_COLUMN].null_count():
        raise InputError(
            f"{table[ID_COLUMN].null_count()} weight row(s) have no sample_id", path=source
        )
    frame = pl.DataFrame(
        {ID_COLUMN: table[ID_COLUMN].cast(pl.String), WEIGHT_COLUMN: _numbers(table, source)}
    )
    frame = _one_per_sample(frame, source)
    listed = set(frame[ID_COLUMN].to_list())
    lacking = [sid for sid in kept_ids if sid not in listed]
    if lacking and default is None:
        # A table that matches no kept sample at all usually holds other ids.
        unmatched = (
            f"; none of the table's ids is a kept sample (its first: {frame[ID_COLUMN][0]!r})"
            if len(lacking) == len(kept_ids) and frame.height
            else ""
        )
        raise InputError(
            f"no weight for {len(lacking)} of {len(kept_ids)} kept samples "
            f"({_some(lacking)}){unmatched}; add them to the table, or pass "
            "--weight-default W to give them W",
            path=source,
        )
    if lacking:
        fill = pl.DataFrame(
            {ID_COLUMN: lacking, WEIGHT_COLUMN: [float(default or 0.0)] * len(lacking)},
            schema=frame.schema,
        )
        frame = pl.concat([frame, fill])
    return TableWeights(frame=frame, filled=len(lacking))


def _numbers(table: pl.DataFrame, source: object) -> pl.Series:
    """The weight column as Float64; InputError for anything but finite numbers >= 0."""
    import polars as pl

    raw = table[WEIGHT_COLUMN]
    if raw.dtype == pl.String:
        # CSV cells such as "0.5" parse; "n/a" stays null below and is refused.
        values = raw.str.strip_chars().cast(pl.Float64, strict=False)
    elif raw.dtype.is_numeric():
        values = raw.cast(pl.Float64)
    else:
        raise InputError(f"the weight column holds {raw.dtype}, not numbers", path=source)
    bad = values.is_null() | ~values.is_finite() | (values < 0)
    bad = bad.fill_null(True)
    if bad.any():
        rows = table.filter(bad)
        sid, value = rows[ID_COLUMN][0], rows[WEIGHT_COLUMN][0]
        shown = "an empty cell" if value is None else repr(value)
        raise InputError(
            f"{rows.height} weight(s) are not finite numbers >= 0 "
            f"(first: sample {str(sid)!r} has {shown})",
            path=source,
        )
    return values


def _one_per_sample(frame: pl.DataFrame, source: object) -> pl.DataFrame:
    """One row per sample: repeats that agree collapse; repeats that differ are refused."""
    import polars as pl

    counts = frame.group_by(ID_COLUMN, maintain_order=True).agg(
        pl.col(WEIGHT_COLUMN).n_unique().alias("values"),
        pl.col(WEIGHT_COLUMN).unique(maintain_order=True).alias("weights"),
    )
    clash = counts.filter(pl.col("values") > 1)
    if clash.height:
        sid, weights = clash.row(0)[0], clash.row(0)[2]
        listed = ", ".join(f"{w:g}" for w in weights)
        raise InputError(
            f"weights give {clash.height} sample(s) more than once with different weights "
            f"(first: {sid!r}: {listed})",
            path=source,
        )
    return frame.unique(ID_COLUMN, keep="first", maintain_order=True)


def _some(ids: Sequence[str]) -> str:
    """The first few ids, then "..." when there are more."""
    shown = ", ".join(ids[:SHOW_IDS])
    return shown + (", ..." if len(ids) > SHOW_IDS else "")
