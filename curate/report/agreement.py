"""`curate agree` output: table, JSON and Markdown of one `RunAgreement`."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from curate.core.outcome import LABELS, OUTCOMES
from curate.report.render import _clean, _fmt

if TYPE_CHECKING:
    from rich.console import Console

    from curate.analysis.agreement import RunAgreement

# Changed samples listed in the table and Markdown (JSON lists them all).
SHOWN_CHANGES = 20
_ROWS = [*OUTCOMES, "none"]


def _label(outcome: str | None) -> str:
    return "no score" if outcome in (None, "none") else LABELS[outcome]


def _name(source: str, grader: str | None) -> str:
    return f"{source} ({grader})" if grader else source


def _num(value: float, spec: str = ".3f") -> str:
    """A figure, or "n/a" when it is undefined (no pair, or a grader with one score)."""
    return "n/a" if math.isnan(value) else _fmt(value, spec)


def overview_rows(r: RunAgreement) -> list[tuple[str, str]]:
    """The figures every format shows, in order: one function for table and Markdown."""
    a = r.result
    return [
        ("rollouts scored by both", f"{a.pairs:,}"),
        ("scored by the first only", f"{a.only_first:,}"),
        ("scored by the second only", f"{a.only_second:,}"),
        ("scores", "binary" if a.binary else "continuous"),
        ("pass/fail agreement", _num(a.observed_agreement, ".1%")),
        ("Cohen's kappa (pass/fail)", _num(a.kappa)),
        ("Spearman rank correlation", _num(a.spearman)),
        ("identical scores", _num(a.exact_agreement, ".1%")),
        ("mean score", f"{_num(a.mean_first)} -> {_num(a.mean_second)}"),
        ("mean absolute difference", _num(a.mean_abs_difference)),
        ("samples whose outcome changes", f"{len(a.changes):,} of {a.samples:,}"),
    ]


def render_agreement_json(r: RunAgreement) -> str:
    return json.dumps(_clean(r.to_dict()), indent=2) + "\n"


def render_agreement_markdown(r: RunAgreement) -> str:
    a = r.result
    lines = [
        "## curate agree",
        "",
        f"first: `{_name(r.first, r.first_grader)}`, second: `{_name(r.second, r.second_grader)}`",
        "",
        "| figure | value |",
        "| --- | ---: |",
        *(f"| {k} | {v} |" for k, v in overview_rows(r)),
        "",
        "| pass/fail | second passes | second fails |",
        "| --- | ---: | ---: |",
        f"| first passes | {a.both_pass} | {a.first_only_pass} |",
        f"| first fails | {a.second_only_pass} | {a.both_fail} |",
        "",
        "| outcome (first \\ second) | " + " | ".join(_label(c) for c in _ROWS) + " |",
        "| --- |" + " ---: |" * len(_ROWS),
        *(
            f"| {_label(x)} | " + " | ".join(str(a.outcome_table[x][y]) for y in _ROWS) + " |"
            for x in _ROWS
        ),
    ]
    if a.changes:
        lines += ["", "| sample | first | second |", "| --- | --- | --- |"]
        lines += [
            f"| `{c.sample_id}` | {_label(c.before)} | {_label(c.after)} |"
            for c in a.changes[:SHOWN_CHANGES]
        ]
        if len(a.changes) > SHOWN_CHANGES:
            lines.append(f"\n{len(a.changes) - SHOWN_CHANGES} more in `--format json`")
    return "\n".join(lines) + "\n"


def render_agreement_table(r: RunAgreement, console: Console) -> None:
    from rich.table import Table

    a = r.result
    overview = Table(
        title=f"curate agree: {_name(r.first, r.first_grader)} vs "
        f"{_name(r.second, r.second_grader)}",
        show_header=False,
    )
    overview.add_column("figure", style="bold")
    overview.add_column("value", justify="right")
    for key, value in overview_rows(r):
        overview.add_row(key, value)
    console.print(overview)
    confusion = Table(title="pass/fail (full credit), rollouts")
    confusion.add_column("first \\ second")
    confusion.add_column("passes", justify="right")
    confusion.add_column("fails", justify="right")
    confusion.add_row("passes", str(a.both_pass), str(a.first_only_pass))
    confusion.add_row("fails", str(a.second_only_pass), str(a.both_fail))
    console.print(confusion)
    outcomes = Table(title="sample outcomes (first \\ second)")
    outcomes.add_column("first \\ second")
    for c in _ROWS:
        outcomes.add_column(_label(c), justify="right")
    for x in _ROWS:
        outcomes.add_row(_label(x), *(str(a.outcome_table[x][y]) for y in _ROWS))
    console.print(outcomes)
    if a.changes:
        changed = Table(title=f"samples whose outcome changes ({len(a.changes)})")
        changed.add_column("sample")
        changed.add_column("first")
        changed.add_column("second")
        for change in a.changes[:SHOWN_CHANGES]:
            changed.add_row(change.sample_id, _label(change.before), _label(change.after))
        console.print(changed)
        if len(a.changes) > SHOWN_CHANGES:
            console.print(f"{len(a.changes) - SHOWN_CHANGES} more: --format json lists all")
