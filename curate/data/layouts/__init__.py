"""The catalogue of data set layouts: which public sets store their prompt, reference
and id where, recognised from field names and types (`detect`), or named with
``--layout NAME``. `curate layouts` lists them.

Each layout is one small module here exposing ``LAYOUT`` (a `Layout`); adding one is
writing that module and one `LAYOUTS.add` line below. Detection tries the layouts in
the order they are added, so the more specific ones come first: trainer files (whose
prompt is already built) before the evaluation sets, and the generic chat layout last.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from curate.core.registry import Registry
from curate.data.layouts.base import Columns, Layout
from curate.errors import InputError, UsageError

if TYPE_CHECKING:
    import polars as pl

__all__ = ["AUTO", "LAYOUTS", "NONE", "Columns", "Layout", "detect", "get_layout", "pick"]

AUTO = "auto"  # detect the layout from the fields
NONE = "none"  # no layout: the generic field names (prompt, question, answer, ...)


def _unknown(name: str, names: list[str]) -> str:

    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown layout '{name}'{hint} (choose from {AUTO}, {NONE}, {', '.join(names)})"


LAYOUTS: Registry[Layout] = Registry(
    "layout", normalise=lambda name: name.strip().lower(), unknown=_unknown
)
for _name, _module in (
    ("verl", "verl"),
    ("openai-rft", "openai_rft"),
    ("openrlhf", "openrlhf"),
    ("humaneval", "humaneval"),
    ("mbpp", "mbpp"),
    ("apps", "apps"),
    ("codecontests", "codecontests"),
    ("livecodebench", "livecodebench"),
    ("trl", "trl"),
    ("mmlu-pro", "mmlu_pro"),
    ("gpqa", "gpqa"),
    ("arc", "arc"),
    ("mmlu", "mmlu"),
    ("lettered-options", "lettered"),
    ("gsm8k", "gsm8k"),
    ("aime", "aime"),
    ("math", "math"),
    ("chat", "chat"),
):
    LAYOUTS.add(_name, f"curate.data.layouts.{_module}:LAYOUT")


def all_layouts() -> list[Layout]:
    """Every layout, in detection order."""
    return [LAYOUTS.get(name) for name in LAYOUTS.names()]


def get_layout(name: str) -> Layout:
    return LAYOUTS.get(name)


def detect(frame: pl.DataFrame) -> Layout | None:
    """The first layout (in detection order) that recognises the data, or None."""
    cols = Columns.of(frame)
    return next((layout for layout in all_layouts() if layout.matches(cols)), None)


def pick(frame: pl.DataFrame, name: str | None, *, source: object = None) -> Layout | None:
    """The layout `name` asks for: detected (``auto``), none (``none`` or None), or the
    named one, which must recognise the data (else a one-line InputError saying what
    it expects)."""
    if name is None or name.strip().lower() == NONE:
        return None
    if name.strip().lower() == AUTO:
        return detect(frame)
    if name not in LAYOUTS:
        raise UsageError(_unknown(name, LAYOUTS.names()))
    layout = get_layout(name)
    if not layout.matches(Columns.of(frame)):
        raise InputError(
            f"--layout {layout.name}: the data does not have its fields (expects "
            f"{layout.expects}; have: {', '.join(frame.columns)})",
            path=source,
        )
    return layout
