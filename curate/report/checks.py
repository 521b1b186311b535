"""CI checks on a data-set summary: each names itself when it fails."""

from __future__ import annotations

from dataclasses import dataclass

from curate.stats.dataset import DatasetSummary


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    message: str


def evaluate_checks(
    summary: DatasetSummary,
    *,
    fail_under_signal: float | None = None,
    max_error_rate: float | None = None,
) -> list[CheckResult]:
    """Check the requested checks; an unrequested check is not listed."""
    results: list[CheckResult] = []
    if fail_under_signal is not None:
        share = summary.high_variance_fraction
        ok = share >= fail_under_signal
        results.append(
            CheckResult(
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
            CheckResult(
                "max-error-rate",
                ok,
                f"error rate {rate:.2%} ({summary.errors} of {summary.rollouts} rollouts) "
                f"{'<=' if ok else '>'} allowed {max_error_rate:.2%}",
            )
        )
    return results
