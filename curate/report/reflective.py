"""`curate report RUN --show reflective`: per sample of a `--grader r3` run, the reference
tokens whose certainty varies most across the group (the reasoning-reflective tokens),
as a rich table, Markdown, or JSON:

    source      str (when known)
    reflective  [{sample_id: str, rollouts: int, reference_tokens: int,
                  tokens: [{position: int, token: str, spread: float, weight: float}]}],
                in sample_id order; `tokens` holds the `top` tokens of highest spread,
                highest first; `spread` is the std of the token's probability across the
                group's rollouts, `weight` its R3 weight
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from curate.analysis.reflective import shown_token
from curate.report.render import _clean, _md_cell

if TYPE_CHECKING:
    from rich.console import Console

    from curate.analysis.reflective import ReflectiveTokens


def reflective_dict(
    samples: Mapping[str, ReflectiveTokens], top: int, *, source: str | None = None
) -> dict[str, Any]:
    """The JSON of `--show reflective` (module docstring)."""
    out: dict[str, Any] = {}
    if source is not None:
        out["source"] = source
    out["reflective"] = [
        {
            "sample_id": sid,
            "rollouts": item.rollouts,
            "reference_tokens": len(item.tokens),
            "tokens": [
                {
                    "position": j,
                    "token": item.tokens[j],
                    "spread": item.spread[j],
                    "weight": item.weights[j],
                }
                for j in item.top(top)
            ],
        }
        for sid, item in samples.items()
    ]
    return _clean(out)


def render_reflective_json(
    samples: Mapping[str, ReflectiveTokens], top: int, *, source: str | None = None
) -> str:
    text = json.dumps(reflective_dict(samples, top, source=source), indent=2, ensure_ascii=False)
    return text + "\n"


def _listed(item: ReflectiveTokens, top: int) -> str:
    return "  ".join(
        f"'{shown_token(item.tokens[j])}'@{j} {item.spread[j]:.3f}" for j in item.top(top)
    )


def _heading(samples: Mapping[str, ReflectiveTokens], top: int) -> str:
    if not samples:
        return "no reference certainties stored yet (no rollout was scored by r3)"
    return (
        f"{len(samples)} samples: their {top} reference tokens (@position) of highest "
        "certainty spread across rollouts (std of the token's probability; R3 weights "
        "them highest)"
    )


def render_reflective_markdown(
    samples: Mapping[str, ReflectiveTokens], top: int, *, source: str | None = None
) -> str:
    lines = [f"## curate report --show reflective{f': `{source}`' if source else ''}", ""]
    lines.append(_heading(samples, top))
    if samples:
        lines += ["", "| sample_id | N | tokens (spread) |", "| --- | ---: | --- |"]
        for sid, item in samples.items():
            cell = _md_cell(_listed(item, top)).replace("`", "\\`")
            lines.append(f"| {_md_cell(sid)} | {item.rollouts} | {cell} |")
    return "\n".join(lines) + "\n"


def render_reflective_table(
    samples: Mapping[str, ReflectiveTokens],
    top: int,
    console: Console,
    *,
    source: str | None = None,
) -> None:
    from rich.table import Table
    from rich.text import Text

    if samples:
        table = Table(title=f"reflective tokens{f': {source}' if source else ''}")
        table.add_column("sample_id", overflow="fold")
        table.add_column("N", justify="right")
        table.add_column("tokens (spread)", overflow="fold")
        for sid, item in samples.items():
            # Text, not markup: a token may hold "[...]".
            table.add_row(Text(sid), str(item.rollouts), Text(_listed(item, top)))
        console.print(table)
    console.print(_heading(samples, top), highlight=False, markup=False)
