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
    # How prompt_tokens and completion_tokens were counted (TOKEN_COUNT_SOURCES); null
    # on rows written before it, and on rows with no counts. Late too.
    token_count_source: str | None = None
    # Token confidence (`curate eval --logprobs K`, curate.stats.confidence): the mean
    # sampled-token log-probability, the mean entropy over the top K, DeepConf's mean
    # token confidence, lowest group confidence and tail confidence, and the record
    # lows of the group confidence (the token count at which each new low was reached,
    # and its value) from which an early stop at any threshold is replayed. Null
    # without --logprobs. Late too.
    logprob_mean: float | None = None
    entropy_mean: float | None = None
    confidence_mean: float | None = None
    confidence_lowest_group: float | None = None
    confidence_tail: float | None = None
    confidence_low_at: list[int] | None = None
    confidence_low: list[float] | None = None
    # The per-token arrays (--keep-token-logprobs only): each sampled token's
    # log-probability and the top K log-probabilities at its step.
    token_logprobs: list[float] | None = None
    top_logprobs: list[list[float]] | None = None


# How a rollout's token counts were made: reported per rollout by the engine or server
# (exact), counted with the model's tokenizer from the text (tokenizer), or shares of a
# request's total (estimated).
TOKEN_COUNT_SOURCES: Final = ("exact", "tokenizer", "estimated")


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
    "token_count_source": "String",
    "logprob_mean": "Float64",
    "entropy_mean": "Float64",
    "confidence_mean": "Float64",
    "confidence_lowest_group": "Float64",
    "confidence_tail": "Float64",
    "confidence_low_at": "List(Int32)",
    "confidence_low": "List(Float64)",
    "token_logprobs": "List(Float64)",
    "top_logprobs": "List(List(Float64))",
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
