"""`curate report RUN --show suspects`: the suspect labels, one row per flagged sample,
as a rich table, Markdown, or JSON:

    source          str (when known)
    suspect_labels  {count: int | null, min_share: float, min_n: int, reason: str | null}
                    (as in the report; count null and `reason` saying why without a check)
    suspects        [{sample_id: str, reference: str | null, majority_answer: str,
                      majority_share: float, majority_count: int, n_scored: int}],
                    in sample_id order
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from curate.report.render import _clean, _md_cell, _one_line

if TYPE_CHECKING:
    from rich.console import Console

    from curate.analysis.suspects import SuspectCheck

# How much of a reference or an answer fits in a cell of the table and Markdown.
ANSWER_WIDTH = 40


def suspects_dict(check: SuspectCheck, *, source: str | None = None) -> dict[str, Any]:
    """The JSON of `--show suspects` (module docstring)."""
    out: dict[str, Any] = {}
    if source is not None:
        out["source"] = source
    out["suspect_labels"] = check.summary()
    out["suspects"] = [] if check.frame is None else check.frame.to_dicts()
    return _clean(out)


def render_suspects_json(check: SuspectCheck, *, source: str | None = None) -> str:
    return json.dumps(suspects_dict(check, source=source), indent=2, ensure_ascii=False) + "\n"


def _heading(check: SuspectCheck) -> str:
    """'3 suspect labels (the majority answer of >= 60% of >= 4 scored rollouts is graded
    wrong)', or why there is no check."""
    if check.count is None:
        return f"no suspect-label check: {check.reason}"
    n = check.count
    return (
        f"{n} suspect label{'' if n == 1 else 's'}: samples where at least "
        f"{check.min_share:.0%} of at least {check.min_n} scored rollouts agree on an "
        "answer graded wrong (check the reference)"
    )


def _cell(value: str | None) -> str:
    return "(none)" if value is None else _one_line(value, ANSWER_WIDTH)


def render_suspects_markdown(check: SuspectCheck, *, source: str | None = None) -> str:
    lines = [f"## curate report --show suspects{f': `{source}`' if source else ''}", ""]
    lines.append(_heading(check))
    if check.frame is not None and check.frame.height:
        lines += [
            "",
            "| sample_id | reference | majority answer | share | N |",
            "| --- | --- | --- | ---: | ---: |",
        ]
        lines += [
            f"| {_md_cell(row['sample_id'])} | {_md_cell(_cell(row['reference']))} "
            f"| {_md_cell(_cell(row['majority_answer']))} | {row['majority_share']:.1%} "
            f"| {row['n_scored']} |"
            for row in check.frame.iter_rows(named=True)
        ]
    return "\n".join(lines) + "\n"


def render_suspects_table(
    check: SuspectCheck, console: Console, *, source: str | None = None
) -> None:
    from rich.table import Table
    from rich.text import Text

    if check.frame is None or check.frame.height == 0:
        console.print(_heading(check), highlight=False, markup=False)
        return
    table = Table(title=f"suspect labels{f': {source}' if source else ''}")
    table.add_column("sample_id", overflow="fold")
    table.add_column("reference", max_width=ANSWER_WIDTH, overflow="ellipsis")
    table.add_column("majority answer", max_width=ANSWER_WIDTH, overflow="ellipsis")
    table.add_column("share", justify="right")
    table.add_column("N", justify="right")
    for row in check.frame.iter_rows(named=True):
        # Text, not markup: an id or an answer may hold "[...]".
        table.add_row(
            Text(row["sample_id"]),
            Text(_cell(row["reference"])),
            Text(_cell(row["majority_answer"])),
            f"{row['majority_share']:.1%}",
            str(row["n_scored"]),
        )
    console.print(table)
    console.print(_heading(check), highlight=False, markup=False)
