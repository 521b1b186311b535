"""Render a data-set summary as rich tables, JSON, or Markdown (for CI job summaries)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from curate.core.outcome import CATEGORIES, LABELS
from curate.report.gates import GateResult
from curate.stats.adaptive import model_based_note
from curate.stats.dataset import DatasetSummary

if TYPE_CHECKING:
    from rich.console import Console

# The table names the learnable category as such.
CATEGORY_LABELS = {
    **{c: LABELS[c] for c in CATEGORIES},
    "high_variance": f"{LABELS['high_variance']} (learnable)",
}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def report_dict(
    summary: DatasetSummary,
    gates: list[GateResult],
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON contract of `curate report --format json` (keys only ever added)."""
    out = summary.to_dict()
    out["gates"] = [{"name": g.name, "passed": g.passed, "message": g.message} for g in gates]
    out["passed"] = all(g.passed for g in gates)
    if source is not None:
        out["source"] = source
    if usage is not None:
        out["usage"] = usage
    return _clean(out)


def render_json(
    summary: DatasetSummary,
    gates: list[GateResult],
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    return json.dumps(report_dict(summary, gates, source=source, usage=usage), indent=2) + "\n"


def usage_rows(usage: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, value) rows for token usage and cost; none without usage."""
    if usage is None:
        return []
    rows = []
    for key in ("prompt_tokens", "completion_tokens"):
        if usage.get(key) is not None:
            rows.append((key.replace("_", " "), f"{usage[key]:,}"))
    if usage.get("cost_usd") is not None:
        rows.append(("cost (USD)", f"${usage['cost_usd']:,.4f}"))
    return rows


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%}" if total else "n/a"


def render_markdown(
    summary: DatasetSummary,
    gates: list[GateResult],
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    s = summary
    lines = [f"## curate report{f': `{source}`' if source else ''}", ""]
    if gates:
        verdict = "passed" if all(g.passed for g in gates) else "FAILED"
        lines += [f"**Gates {verdict}**", ""]
        lines += [f"- {'✅' if g.passed else '❌'} `{g.name}`: {g.message}" for g in gates]
        lines.append("")
    lines += [
        "| metric | value |",
        "| --- | ---: |",
        f"| samples | {s.samples} |",
        f"| rollouts | {s.rollouts} |",
        f"| errors | {s.errors} ({s.error_rate:.1%}) |",
        f"| mean score | {_fmt(s.mean_score)} |",
        f"| best-of-N | {_fmt(s.best_of_n)} |",
        f"| potential gain | {_fmt(s.potential_gain, '+.3f')} |",
        f"| relative gain | {_fmt(s.relative_gain, '+.1%')} |",
        f"| high-variance share | {s.high_variance_fraction:.1%} |",
        f"| mixed groups at G={s.gate['group_size']} | {s.gate['expected_open_fraction']:.1%} |",
        *(f"| {k} | {v} |" for k, v in usage_rows(usage)),
        "",
        "| category | samples | share |",
        "| --- | ---: | ---: |",
    ]
    lines += [
        f"| {CATEGORY_LABELS[c]} | {s.categories[c]} | {_share(s.categories[c], s.samples)} |"
        for c in CATEGORIES
    ]
    if s.pass_at_k:
        ks = list(s.pass_at_k)
        lines += [
            "",
            "| " + " | ".join(f"pass@{k}" for k in ks) + " |",
            "|" + " ---: |" * len(ks),
            "| " + " | ".join(f"{s.pass_at_k[k]:.3f}" for k in ks) + " |",
        ]
    m = s.compute_multiplier
    lines += [
        "",
        f"**Compute multiplier:** {m.recommended} "
        f"(seed rule of thumb: {m.rule_of_thumb}): {m.reason}.",
    ]
    if note := model_based_note(s.extra):  # adaptive runs (issue 13)
        lines += ["", f"_{note}_"]
    if s.warnings:
        lines += ["", "**Warnings**", ""] + [f"- {w}" for w in s.warnings]
    return "\n".join(lines) + "\n"


def render_table(
    summary: DatasetSummary,
    gates: list[GateResult],
    console: Console,
    *,
    source: str | None = None,
    usage: dict[str, Any] | None = None,
) -> None:
    # rich loads only for the table format: JSON and Markdown output start faster.
    from rich.table import Table

    s = summary
    overview = Table(title=f"curate report{f': {source}' if source else ''}", show_header=False)
    overview.add_column("metric", style="bold")
    overview.add_column("value", justify="right")
    overview.add_row("samples", str(s.samples))
    overview.add_row("rollouts", str(s.rollouts))
    overview.add_row("errors", f"{s.errors} ({s.error_rate:.1%})")
    overview.add_row("mean score", _fmt(s.mean_score))
    overview.add_row("best-of-N", _fmt(s.best_of_n))
    overview.add_row("potential gain", _fmt(s.potential_gain, "+.3f"))
    overview.add_row("relative gain", _fmt(s.relative_gain, "+.1%"))
    overview.add_row("high-variance share", f"{s.high_variance_fraction:.1%}")
    overview.add_row(
        f"mixed groups at G={s.gate['group_size']}", f"{s.gate['expected_open_fraction']:.1%}"
    )
    for key, value in usage_rows(usage):
        overview.add_row(key, value)
    console.print(overview)

    cats = Table(title=f"categories (variance threshold {s.threshold:g})")
    cats.add_column("category")
    cats.add_column("samples", justify="right")
    cats.add_column("share", justify="right")
    for c in CATEGORIES:
        cats.add_row(CATEGORY_LABELS[c], str(s.categories[c]), _share(s.categories[c], s.samples))
    console.print(cats)

    if s.pass_at_k:
        passk = Table(title="pass@k (unbiased)")
        for k in s.pass_at_k:
            passk.add_column(f"k={k}", justify="right")
        passk.add_row(*(f"{v:.3f}" for v in s.pass_at_k.values()))
        console.print(passk)

    m = s.compute_multiplier
    console.print(
        f"[bold]compute multiplier[/bold]: {m.recommended} "
        f"(seed rule of thumb: {m.rule_of_thumb}) - {m.reason}",
        highlight=False,
    )
    if note := model_based_note(s.extra):  # adaptive runs (issue 13)
        console.print(f"[bold]note[/bold]: {note}", highlight=False)
    for w in s.warnings:
        console.print(f"[yellow]warning[/yellow]: {w}", highlight=False)
    for g in gates:
        mark = "[green]PASS[/green]" if g.passed else "[red]FAIL[/red]"
        console.print(f"{mark} {g.name}: {g.message}", highlight=False)
