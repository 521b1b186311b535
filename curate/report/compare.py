"""`build_comparison` (what `curate compare` prints and checks) and its renderings:
a rich table, the JSON contract, Markdown for CI.

The JSON contract of `curate compare --format json` (keys are only ever added; floats
to 6 significant digits; NaN becomes null):

    runs               [{label, path: str, samples, left_out: int, mean_score,
                         best_of_n: float | null, high_variance_fraction,
                         expected_open_fraction: float, categories: {...: int},
                         pass_at_k: {"1": float, ...}, binary_scores: bool}], in order
    samples_compared   int: samples scored in every run
    samples_left_out   int: samples some run has but not every run scored
    group_size, alpha, threshold
    before, after      str: the labels of the pair compared sample by sample
    test               "fisher_exact" | "mann_whitney"
    significant        int: samples whose change is significant at alpha
    transitions        [{before: str, after: str, count: int}]: all nine outcome pairs
    steps              [{before, after, test: str, significant: int, sets: {name: int}}]:
                       each pair of neighbouring runs (empty with two runs)
    sets               {learned, forgotten, newly_learnable, still_unreachable:
                        {count: int, share: float}}
    forecast           {samples: int, pearson, spearman, mean_abs_error, predicted_mean,
                        observed_mean: float | null, bins: [{bin: str, samples: int,
                        predicted, observed: float | null}]}: the first run's pass rates
                       as a forecast of the last's
    warnings           [str]
    gates              [{name, passed, message}]
    passed             bool
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curate.core.outcome import CATEGORIES, DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD, LABELS
from curate.report.checks import CheckResult
from curate.report.render import _clean
from curate.stats.compare import (
    DEFAULT_ALPHA,
    OUTCOME_ORDER,
    SET_DEFINITIONS,
    SET_LABELS,
    SETS,
    TEST_LABELS,
    smallest_significant_rise,
)
from curate.stats.mixed import mixed_label

if TYPE_CHECKING:
    from rich.console import Console

    from curate.analysis.compare import Comparison


@dataclass
class CompareReport:
    comparison: Comparison
    checks: list[CheckResult]
    warnings: list[str]

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [g for g in self.checks if not g.passed]


def build_comparison(
    paths: Sequence[str | os.PathLike[str]],
    *,
    alpha: float = DEFAULT_ALPHA,
    group_size: int = DEFAULT_GROUP_SIZE,
    threshold: float = DEFAULT_THRESHOLD,
    fail_on_forgotten: float | None = None,
) -> CompareReport:
    """`compare_runs`, its warnings, and the `--fail-on-forgotten` gate: fails when more
    than that share of the compared samples fell significantly (the forgotten set)."""
    from curate.analysis.compare import compare_runs

    if fail_on_forgotten is not None and not 0.0 <= fail_on_forgotten <= 1.0:
        raise ValueError("fail_on_forgotten is a share in [0, 1]")
    comparison = compare_runs(paths, alpha=alpha, group_size=group_size, threshold=threshold)
    checks: list[CheckResult] = []
    if fail_on_forgotten is not None:
        share = comparison.share("forgotten")
        ok = share <= fail_on_forgotten
        checks.append(
            CheckResult(
                "fail-on-forgotten",
                ok,
                f"forgotten share {share:.1%} ({comparison.sets['forgotten']} of "
                f"{comparison.common} samples fell significantly from {comparison.before.label} "
                f"to {comparison.after.label} at alpha {alpha:g}) "
                f"{'<=' if ok else '>'} allowed {fail_on_forgotten:.1%}",
            )
        )
    return CompareReport(comparison, checks, _warnings(comparison))


def _warnings(c: Comparison) -> list[str]:
    out: list[str] = []
    if c.left_out:
        out.append(
            f"{c.left_out} samples are not scored in every run and are left out; "
            f"{c.common} are compared"
        )
    adaptive = [r.label for r in (c.before, c.after) if r.adaptive]
    if adaptive:
        out.append(
            f"{', '.join(adaptive)}: adaptive, so each sample's rollout count depended on its "
            "outcomes; the per-sample tests treat the counts as fixed"
        )
    if c.test != "fisher_exact":
        return out
    # The typical (median) rollout count of each run decides how coarse the test is.
    n_a = round(c.before.summary.rollouts_per_sample["median"])
    n_b = round(c.after.summary.rollouts_per_sample["median"])
    need = smallest_significant_rise(n_a, n_b, c.alpha)
    if need is None:
        out.append(
            f"with {n_a} and {n_b} rollouts per sample no change is significant at alpha "
            f"{c.alpha:g}: learned and forgotten stay empty (use more rollouts)"
        )
    elif need > n_b // 2:
        out.append(
            f"with {n_a} and {n_b} rollouts per sample a rise from 0/{n_a} is significant "
            f"only at {need}/{n_b} or more: smaller changes are not called learned or forgotten"
        )
    return out


# -- what every rendering shows, computed once ---------------------------------------


def _metric_rows(c: Comparison) -> list[tuple[str, list[str]]]:
    """The side-by-side (and, over checkpoints, evolution) rows: label, one cell a run."""
    g = c.group_size
    rows: list[tuple[str, list[str]]] = [
        ("samples in run", [str(r.samples) for r in c.runs]),
        ("mean score", [_fmt(r.summary.mean_score) for r in c.runs]),
        ("best-of-N", [_fmt(r.summary.best_of_n) for r in c.runs]),
        ("high-variance share", [f"{r.summary.high_variance_fraction:.1%}" for r in c.runs]),
        (
            mixed_label(g),
            [f"{r.summary.gate['expected_open_fraction']:.1%}" for r in c.runs],
        ),
    ]
    rows += [(LABELS[cat], [str(r.summary.categories[cat]) for r in c.runs]) for cat in CATEGORIES]
    ks: list[str] = []
    for r in c.runs:
        ks += [k for k in r.summary.pass_at_k if k not in ks]
    for k in sorted(ks, key=int):
        rows.append(
            (f"pass@{k}", [_fmt(r.summary.pass_at_k.get(k)) for r in c.runs]),
        )
    return rows


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%}" if total else "0.0%"


def comparison_dict(report: CompareReport) -> dict[str, Any]:
    """The JSON contract (module docstring)."""
    c = report.comparison
    out: dict[str, Any] = {
        "runs": [
            {
                "label": r.label,
                "path": str(r.path),
                "samples": r.samples,
                "left_out": r.left_out,
                "mean_score": r.summary.mean_score,
                "best_of_n": r.summary.best_of_n,
                "high_variance_fraction": r.summary.high_variance_fraction,
                "expected_open_fraction": r.summary.gate["expected_open_fraction"],
                "categories": dict(r.summary.categories),
                "pass_at_k": dict(r.summary.pass_at_k),
                "binary_scores": r.binary,
            }
            for r in c.runs
        ],
        "samples_compared": c.common,
        "samples_left_out": c.left_out,
        "group_size": c.group_size,
        "alpha": c.alpha,
        "threshold": c.threshold,
        "before": c.before.label,
        "after": c.after.label,
        "test": c.test,
        "significant": c.significant,
        "transitions": [{"before": a, "after": b, "count": n} for a, b, n in c.transitions],
        "sets": {name: {"count": c.sets[name], "share": c.share(name)} for name in SETS},
        "steps": [
            {
                "before": step.before,
                "after": step.after,
                "test": step.test,
                "significant": step.significant,
                "sets": dict(step.sets),
            }
            for step in c.steps
        ],
        "forecast": c.forecast,
        "warnings": list(report.warnings),
        "gates": [
            {"name": g.name, "passed": g.passed, "message": g.message} for g in report.checks
        ],
        "passed": all(g.passed for g in report.checks),
    }
    return _clean(out)


def render_comparison_json(report: CompareReport) -> str:
    return json.dumps(comparison_dict(report), indent=2) + "\n"


def _transition_grid(c: Comparison) -> dict[tuple[str, str], int]:
    return {(a, b): n for a, b, n in c.transitions}


def _forecast_rows(c: Comparison) -> list[list[str]]:
    """Calibration rows: bin of the first run's rate, samples, forecast, observed."""
    bins = c.forecast.get("bins") or []
    assert isinstance(bins, list)
    return [
        [str(b["bin"]), str(b["samples"]), _fmt(b["predicted"]), _fmt(b["observed"])]
        for b in bins
        if b["samples"]
    ]


def _forecast_line(c: Comparison) -> str:
    f = c.forecast

    def num(key: str) -> str:
        value = f.get(key)
        return "-" if not isinstance(value, float) or value != value else f"{value:.3f}"

    return (
        f"forecast: {c.before.label}'s pass rates against {c.after.label}'s: Pearson r "
        f"{num('pearson')}, Spearman {num('spearman')}, mean absolute error "
        f"{num('mean_abs_error')} (mean {num('predicted_mean')} forecast, "
        f"{num('observed_mean')} observed)"
    )


def _test_line(c: Comparison) -> str:
    return (
        f"{TEST_LABELS[c.test]}, alpha {c.alpha:g}: {c.significant} of {c.common} samples "
        f"changed significantly from {c.before.label} to {c.after.label}"
    )


def render_comparison_markdown(report: CompareReport) -> str:
    c = report.comparison
    labels = [r.label for r in c.runs]
    lines = [f"## curate compare: {' → '.join(f'`{label}`' for label in labels)}", ""]
    if report.checks:
        verdict = "passed" if not report.failed_checks else "FAILED"
        lines += [f"**Checks {verdict}**", ""]
        lines += [f"- {'✅' if g.passed else '❌'} `{g.name}`: {g.message}" for g in report.checks]
        lines.append("")
    lines += [
        f"{c.common} samples compared"
        + (f" ({c.left_out} not scored in every run left out)" if c.left_out else ""),
        "",
        "| metric | " + " | ".join(labels) + " |",
        "| --- |" + " ---: |" * len(labels),
    ]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in _metric_rows(c)]
    grid = _transition_grid(c)
    lines += [
        "",
        f"Outcome transitions, {c.before.label} (rows) → {c.after.label} (columns):",
        "",
        "| before \\ after | " + " | ".join(LABELS[o] for o in OUTCOME_ORDER) + " |",
        "| --- |" + " ---: |" * len(OUTCOME_ORDER),
    ]
    lines += [
        f"| {LABELS[a]} | " + " | ".join(str(grid[(a, b)]) for b in OUTCOME_ORDER) + " |"
        for a in OUTCOME_ORDER
    ]
    lines += ["", "| set | samples | share | definition |", "| --- | ---: | ---: | --- |"]
    lines += [
        f"| {SET_LABELS[s]} | {c.sets[s]} | {_share(c.sets[s], c.common)} | {SET_DEFINITIONS[s]} |"
        for s in SETS
    ]
    if c.steps:
        lines += [
            "",
            "Between neighbouring runs (samples):",
            "",
            "| step | significant | " + " | ".join(SET_LABELS[s] for s in SETS) + " |",
            "| --- | ---: |" + " ---: |" * len(SETS),
        ]
        lines += [
            f"| {step.before} → {step.after} | {step.significant} | "
            + " | ".join(str(step.sets[s]) for s in SETS)
            + " |"
            for step in c.steps
        ]
    lines += [
        "",
        f"Forecast: {c.before.label}'s pass rate (binned) against {c.after.label}'s:",
        "",
        f"| {c.before.label} pass rate | samples | forecast | observed |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _forecast_rows(c)]
    lines += ["", _forecast_line(c), "", _test_line(c)]
    if report.warnings:
        lines += ["", "**Warnings**", ""] + [f"- {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def render_comparison_table(report: CompareReport, console: Console) -> None:
    from rich.table import Table

    c = report.comparison
    runs = Table(title=f"curate compare: {c.common} samples in every run")
    runs.add_column("metric", style="bold")
    for r in c.runs:
        runs.add_column(r.label, justify="right")
    for name, cells in _metric_rows(c):
        runs.add_row(name, *cells)
    console.print(runs)

    grid = _transition_grid(c)
    trans = Table(title=f"outcome transitions: {c.before.label} (rows) -> {c.after.label}")
    trans.add_column("before \\ after", style="bold")
    for o in OUTCOME_ORDER:
        trans.add_column(LABELS[o], justify="right")
    for a in OUTCOME_ORDER:
        trans.add_row(LABELS[a], *(str(grid[(a, b)]) for b in OUTCOME_ORDER))
    console.print(trans)

    sets = Table(title=f"sets ({c.before.label} -> {c.after.label})")
    sets.add_column("set", style="bold")
    sets.add_column("samples", justify="right")
    sets.add_column("share", justify="right")
    sets.add_column("definition")
    for s in SETS:
        sets.add_row(SET_LABELS[s], str(c.sets[s]), _share(c.sets[s], c.common), SET_DEFINITIONS[s])
    console.print(sets)
    if c.steps:
        steps = Table(title="between neighbouring runs (samples)")
        steps.add_column("step", style="bold")
        steps.add_column("significant", justify="right")
        for s in SETS:
            steps.add_column(SET_LABELS[s], justify="right")
        for step in c.steps:
            steps.add_row(
                f"{step.before} -> {step.after}",
                str(step.significant),
                *(str(step.sets[s]) for s in SETS),
            )
        console.print(steps)
    forecast = Table(title=f"forecast: {c.before.label} pass rate -> {c.after.label}")
    for name in (f"{c.before.label} pass rate", "samples", "forecast", "observed"):
        forecast.add_column(name, justify="right")
    for row in _forecast_rows(c):
        forecast.add_row(*row)
    console.print(forecast)
    console.print(_forecast_line(c), highlight=False)
    console.print(_test_line(c), highlight=False)
    for w in report.warnings:
        console.print(f"warning: {w}", highlight=False)
