"""Suspect labels of a run: `load_suspects` reads the extracted answers (`curate.store`)
and flags the samples whose rollouts agree on an answer the grader rejects
(`curate.stats.suspects`).

Kept apart from `load_analysis` on purpose: the answers are strings, read in a second
pass, and on a large run the check costs several times the rest of `curate report`
(1M samples x 8 rollouts: about 4 s against under 1 s). `report_suspects` decides
whether the report runs it unasked.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from curate.data.samples import ANSWER_FIELDS
from curate.stats.suspects import DEFAULT_MIN_N, DEFAULT_MIN_SHARE, check_parameters
from curate.store.manifest import RunManifest
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.store.scores import has_answers, read_answers

if TYPE_CHECKING:
    import polars as pl

# The report checks unasked up to this many rollouts: there the check adds a few tens of
# milliseconds (a tenth of the report or less). Above it, `--show suspects` checks.
AUTO_CHECK_ROLLOUTS: Final = 100_000
# Why there is no check, for the report to say.
NO_ANSWERS: Final = (
    "the check needs extracted answers: a run directory from `curate eval`, or a score "
    "table with an `extracted` column"
)
NONE_EXTRACTED: Final = "the grader recorded no extracted answer for any scored rollout"
# The columns of `SuspectCheck.frame`, in order.
LISTED_COLUMNS: Final = (
    "sample_id",
    "reference",
    "majority_answer",
    "majority_share",
    "majority_count",
    "n_scored",
)


@dataclass(frozen=True)
class SuspectCheck:
    """The outcome of the suspect-label check on one input.

    `frame` lists the flagged samples (LISTED_COLUMNS, in sample_id order; `reference`
    is the run's reference answer as text, null for a score table) or is None when
    there was no check, and then `reason` says why.
    """

    min_n: int
    min_share: float
    frame: pl.DataFrame | None = None
    reason: str | None = None
    has_answers: bool = True

    @property
    def checked(self) -> bool:
        return self.frame is not None

    @property
    def count(self) -> int | None:
        """Flagged samples; None when there was no check."""
        return None if self.frame is None else self.frame.height

    @property
    def close_misses(self) -> int | None:
        """Flagged samples whose majority answer is a close miss of the reference
        (`curate.stats.close_miss`: likelier the model's mistake than a wrong label);
        None without a check or without the references (a score table)."""
        if self.frame is None or self.frame["reference"].null_count() == self.frame.height:
            return None if self.frame is None or self.frame.height else 0
        from curate.stats.close_miss import close_miss

        pairs = zip(
            self.frame["majority_answer"].to_list(),
            self.frame["reference"].to_list(),
            strict=True,
        )
        return sum(close_miss(answer, reference) for answer, reference in pairs)

    def ids(self) -> pl.Series:
        """The flagged sample ids (empty when there was no check)."""
        import polars as pl

        if self.frame is None:
            return pl.Series("sample_id", [], dtype=pl.String)
        return self.frame["sample_id"]

    def summary(self) -> dict[str, Any]:
        """The report's `suspect_labels` JSON section."""
        return {
            "count": self.count,
            "close_misses": self.close_misses,
            "min_share": self.min_share,
            "min_n": self.min_n,
            "reason": self.reason,
        }


def not_checked(
    reason: str,
    *,
    min_n: int = DEFAULT_MIN_N,
    min_share: float = DEFAULT_MIN_SHARE,
    answers: bool = True,
) -> SuspectCheck:
    """A check that did not run, and why."""
    return SuspectCheck(min_n=min_n, min_share=min_share, reason=reason, has_answers=answers)


def too_large_reason(rollouts: int, source: str) -> str:
    """Why the report skipped the check on a large input, and how to run it."""

    return (
        f"not checked unasked on {rollouts:,} rollouts (it reads every answer); "
        f"check: curate report {shlex.quote(source)} --show suspects"
    )


def report_suspects(
    path: str | os.PathLike[str],
    *,
    rollouts: int,
    asked: bool | None = None,
    min_n: int = DEFAULT_MIN_N,
    min_share: float = DEFAULT_MIN_SHARE,
    manifest: RunManifest | None = None,
) -> SuspectCheck:
    """The check `curate report` shows: run when `asked`, or (asked None) when the input
    of `rollouts` rollouts has at most AUTO_CHECK_ROLLOUTS; otherwise, or without
    extracted answers, a check that did not run and why."""
    check_parameters(min_n, min_share)
    if not has_answers(path):
        return not_checked(NO_ANSWERS, min_n=min_n, min_share=min_share, answers=False)
    if asked or (asked is None and rollouts <= AUTO_CHECK_ROLLOUTS):
        return load_suspects(path, min_n=min_n, min_share=min_share, manifest=manifest)
    return not_checked(too_large_reason(rollouts, str(path)), min_n=min_n, min_share=min_share)


def load_suspects(
    path: str | os.PathLike[str],
    *,
    min_n: int = DEFAULT_MIN_N,
    min_share: float = DEFAULT_MIN_SHARE,
    manifest: RunManifest | None = None,
) -> SuspectCheck:
    """Read the extracted answers of `path` (a run directory or a score table) and flag
    its suspect labels (`curate.stats.suspects.suspect_frame`), with each flagged
    sample's reference from the run's samples.parquet (`manifest`'s `answer_field`,
    read from the run when not given). Input without answers gives a check that did not
    run (`reason`), not an error; unreadable input raises InputError as the scores'
    own read does.
    """
    import polars as pl

    from curate.stats.suspects import suspect_frame

    check_parameters(min_n, min_share)
    rows = read_answers(path)
    if rows is None:
        return not_checked(NO_ANSWERS, min_n=min_n, min_share=min_share, answers=False)
    if (
        rows.select((pl.col("error").is_null() & pl.col("extracted").is_not_null()).any()).item()
        is not True
    ):
        return not_checked(NONE_EXTRACTED, min_n=min_n, min_share=min_share)
    frame = suspect_frame(rows, min_n=min_n, min_share=min_share).filter("suspect_label")
    references = _references(Path(path), frame["sample_id"], manifest)
    frame = frame.join(references, on="sample_id", how="left", maintain_order="left")
    return SuspectCheck(min_n=min_n, min_share=min_share, frame=frame.select(LISTED_COLUMNS))


def _references(path: Path, ids: pl.Series, manifest: RunManifest | None) -> pl.DataFrame:
    """(sample_id, reference as text) for `ids`, from the run's samples.parquet; null
    references for a score table, or when the run names no answer field it has."""
    import polars as pl

    none = pl.Series("reference", [None] * len(ids), dtype=pl.String)
    empty = pl.DataFrame({"sample_id": ids, "reference": none})
    if ids.len() == 0 or not (path.is_dir() and is_run_dir(path)):
        return empty
    store = RolloutStore(path)
    if manifest is None:
        manifest = store.manifest_if_any()
    samples = store.samples_path
    if not samples.is_file():
        return empty
    schema = pl.read_parquet_schema(samples)
    field = manifest.answer_field if manifest is not None else None
    if not field:  # a manifest from before answer_field: the column `curate eval` would pick
        field = next((c for c in ANSWER_FIELDS if c in schema), None)
    # A column, or `struct.field` for an answer nested in a struct column.
    head, nested = (field, "") if field in schema else (field or "").partition(".")[::2]
    if "sample_id" not in schema or head not in schema:
        return empty
    # Two columns of the flagged samples only: samples.parquet may hold long prompts.
    found = (
        pl.scan_parquet(samples)
        .select(pl.col("sample_id").cast(pl.String), head)
        .filter(pl.col("sample_id").is_in(ids.implode()))
        .unique("sample_id", keep="first")
        .collect()
    )
    values = found[head]
    if nested and isinstance(values.dtype, pl.Struct):
        values = values.struct.field(nested)
    text = pl.Series("reference", [_as_text(v) for v in values.to_list()], dtype=pl.String)
    return empty.drop("reference").join(
        pl.DataFrame({"sample_id": found["sample_id"], "reference": text}),
        on="sample_id",
        how="left",
        maintain_order="left",
    )


def _as_text(value: object) -> str | None:
    """A reference as a person reads it: text as is, anything else as JSON."""

    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
