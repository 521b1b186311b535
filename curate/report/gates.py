"""CI gates on a data-set summary: each names itself when it fails."""

from __future__ import annotations

from dataclasses import dataclass

from curate.stats.dataset import DatasetSummary


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    message: str


def evaluate_gates(
    summary: DatasetSummary,
    *,
    fail_under_signal: float | None = None,
    max_error_rate: float | None = None,
) -> list[GateResult]:
    """Check the requested gates; an unrequested gate is not listed."""
    results: list[GateResult] = []
    if fail_under_signal is not None:
        share = summary.high_variance_fraction
        ok = share >= fail_under_signal
        results.append(
            GateResult(
                "fail-under-signal",
                ok,
                f"high-variance share {share:.1%} {'>=' if ok else '<'} "
                f"required {fail_under_signal:.1%}",
            )
        )
    if max_error_rate is not None:
        rate = summary.error_rate
        ok = rate <= max_error_rate
        results.append(
            GateResult(
                "max-error-rate",
                ok,
                f"error rate {rate:.2%} ({summary.errors} of {summary.rollouts} rollouts) "
                f"{'<=' if ok else '>'} allowed {max_error_rate:.2%}",
            )
        )
    return results
