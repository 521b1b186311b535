"""Helpers for the statistics tests: build long-format rollout frames from score lists."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import polars as pl
import pytest

from tests.conftest import long_frame

ERROR = None  # a failed rollout in a score list


@pytest.fixture(scope="session")
def rollouts() -> Callable[[Mapping[str, Sequence[float | None]]], pl.DataFrame]:
    """Factory: `rollouts({"a": [1, 0, None]})` -> a long-format rollout frame."""
    return long_frame
