"""The typed rollout record and the store schema describe the same columns."""

from __future__ import annotations

from curate.core.rollout import ROLLOUT_DTYPES, ROLLOUT_FIELDS, Rollout, rollout_columns
from curate.store.schema import ROLLOUT_COLUMNS, rollout_schema


def test_record_and_schema_agree() -> None:
    assert tuple(ROLLOUT_DTYPES) == ROLLOUT_FIELDS
    assert tuple(ROLLOUT_COLUMNS) == ROLLOUT_FIELDS
    assert list(rollout_schema()) == list(ROLLOUT_FIELDS)


def test_records_to_columns() -> None:
    cols = rollout_columns([Rollout("a", 0, score=1.0), Rollout("a", 1, error="boom")])
    assert list(cols) == list(ROLLOUT_FIELDS)
    assert cols["score"] == [1.0, None]
    assert cols["error"] == [None, "boom"]
