"""From a run or score table to everything `curate report` prints and gates on."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.report.gates import GateResult, evaluate_gates
from curate.stats.dataset import DatasetSummary
from curate.stats.per_sample import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD


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
) -> Report:
    """Read the scores once, summarise them, check the requested gates."""
    from curate.stats.analysis import analyze
    from curate.stats.usage import report_usage
    from curate.store.scores import load_aggregated

    # Data-set statistics only: one pass over the file, and 0/1 scores compressed to
    # a few weighted rows (no per-sample frame is kept).
    source = load_aggregated(path, compress=True)
    adaptive = bool(source.manifest and source.manifest.get("adaptive"))
    analysis = analyze(
        source.rollouts,
        threshold=threshold,
        group_size=group_size,
        adaptive=adaptive,
        aggregate=source.aggregate,
    )
    gates = evaluate_gates(
        analysis.summary, fail_under_signal=fail_under_signal, max_error_rate=max_error_rate
    )
    # Token counts (and cost, given prices) when the input has them; else no section.
    usage = report_usage(Path(path), price_in, price_out)
    return Report(source=str(path), summary=analysis.summary, gates=gates, usage=usage)
