"""`build_report`: from a run or score table to everything `curate report` prints and
gates on (the library call behind the command)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from curate.report.gates import GateResult, evaluate_gates
from curate.stats.dataset import DatasetSummary
from curate.stats.per_sample import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD

# The column the report breaks its figures down by when none is asked for (when present).
DEFAULT_GROUP_COLUMN = "data_source"


@dataclass
class Report:
    source: str
    summary: DatasetSummary
    gates: list[GateResult]
    usage: dict[str, Any] | None

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]


def build_report(
    path: str | os.PathLike[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    fail_under_signal: float | None = None,
    max_error_rate: float | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    group_by: str | None = None,
) -> Report:
    """Read the scores once, summarise them, check the requested gates.

    The summary's `by_group` breaks the figures down by `group_by`, a column of the
    run's samples.parquet or of the score table (an error when missing), or by
    `data_source` when there is one."""
    from curate.analysis import load_analysis

    # Data-set statistics only: one pass over the file (token columns included), and
    # 0/1 scores compressed to a few weighted rows (no per-sample frame is kept).
    loaded = load_analysis(
        path,
        threshold=threshold,
        group_size=group_size,
        per_sample=False,
        group_by=group_by or DEFAULT_GROUP_COLUMN,
        require_group=group_by is not None,
    )
    gates = evaluate_gates(
        loaded.summary, fail_under_signal=fail_under_signal, max_error_rate=max_error_rate
    )
    # Token counts (and cost, given prices) when the input has them; else no section.
    usage = loaded.usage(price_in, price_out)
    return Report(source=str(path), summary=loaded.summary, gates=gates, usage=usage)
