"""One rollout as the store keeps it: the typed record behind every shard row.

`ROLLOUT_DTYPES` (field -> polars dtype name) is what `curate.store.schema` writes;
a test holds the record and the schema to the same fields in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Final


@dataclass(slots=True)
class Rollout:
    """A graded completion, or a failed one: an error is data, never a score."""

    sample_id: str
    rollout_idx: int
    score: float | None = None  # null when `error` is set
    error: str | None = None  # null for a scored rollout
    completion: str | None = None
    extracted: str | None = None  # what the grader compared against the reference
    finish_reason: str | None = None  # "stop", "length", ...
    # Cut short: finish_reason "length" or reasoning never closed (the run's truncation
    # policy says how it is scored and counted; curate.core.reasoning).
    truncated: bool | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    seed: int | None = None  # the seed of the request that produced the rollout
    attempts: int | None = None  # requests made for this rollout (1 + retries)
    # A reward's own value when a declared score range mapped it onto [0, 1] (`score`
    # is the mapped one); null otherwise. Last: shards written before it lack it.
    raw_score: float | None = None
    # The model's reasoning, kept apart from `completion` (the answer); null when it did
    # not reason. `reasoning_closed`: False when it never ended (no answer). Late too.
    reasoning: str | None = None
    reasoning_closed: bool | None = None
    # On an error row: True when the error recurs on a re-run (a resume leaves the row
    # alone), False when it is retried; null on a scored row (curate.core.settled).
    # Late too: older shards read it as null.
    settled: bool | None = None


# Kept as strings so that importing this module does not import polars.
ROLLOUT_DTYPES: Final[dict[str, str]] = {
    "sample_id": "String",
    "rollout_idx": "Int32",
    "score": "Float64",
    "error": "String",
    "completion": "String",
    "extracted": "String",
    "finish_reason": "String",
    "truncated": "Boolean",
    "prompt_tokens": "Int32",
    "completion_tokens": "Int32",
    "latency_s": "Float64",
    "seed": "Int64",
    "attempts": "Int32",
    "raw_score": "Float64",
    "reasoning": "String",
    "reasoning_closed": "Boolean",
    "settled": "Boolean",
}

ROLLOUT_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in fields(Rollout))


def rollout_columns(records: Iterable[Rollout]) -> dict[str, list[Any]]:
    """Records as columns (field -> values), in the schema's order."""
    cols: dict[str, list[Any]] = {name: [] for name in ROLLOUT_FIELDS}
    appenders = [(cols[name].append, name) for name in ROLLOUT_FIELDS]
    for record in records:
        for append, name in appenders:
            append(getattr(record, name))
    return cols
