"""The kind of task a run graded (code, math, multiple choice), and the `ability` and
`data_source` an export gives its rows when the user names neither.

The kind comes from the run's manifest: a `layout` field (the input layout `curate eval`
recognised) when present, else the grader that scored the rollouts. A grader that says
nothing about the task (exact match, a regex, your own function, a judge) gives no kind,
and the exports fall back to the data set's name and `DEFAULT_ABILITY`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

Kind = Literal["code", "math", "multiple_choice"]

KINDS: Final[tuple[Kind, ...]] = ("code", "math", "multiple_choice")
# verl's own preprocessing scripts write ability "math" for GSM8K and MATH; curate writes
# the kind's name for the others, and this when the kind is unknown.
DEFAULT_ABILITY: Final = "general"

# Grader name (the part of the spec before ':') -> the kind of task it scores.
_GRADER_KINDS: Final[dict[str, Kind]] = {
    "code": "code",
    "math": "math",
    "numeric": "math",
    "choice": "multiple_choice",
}
# Words of a layout's name -> kind, for a `layout` recorded as a plain name.
_LAYOUT_WORDS: Final[tuple[tuple[Kind, tuple[str, ...]], ...]] = (
    (
        "code",
        ("code", "humaneval", "mbpp", "apps", "taco", "codecontests", "livecodebench"),
    ),
    (
        "multiple_choice",
        ("choice", "mmlu", "arc", "openbookqa", "gpqa", "hellaswag", "mcq"),
    ),
    ("math", ("math", "gsm8k", "aime", "amc", "numina")),
)


def task_kind(manifest: Mapping[str, Any] | None) -> Kind | None:
    """The run's kind of task: its `layout` first, then its grader; None when neither
    tells."""
    m = manifest or {}
    kind = _layout_kind(m.get("layout"))
    if kind is not None:
        return kind
    grader = m.get("grader")
    if not isinstance(grader, str):
        return None
    return _GRADER_KINDS.get(grader.strip().lower().split(":", 1)[0])


def _layout_kind(layout: object) -> Kind | None:
    if isinstance(layout, Mapping):
        for key in ("kind", "task", "family", "name"):
            kind = _layout_kind(layout.get(key))
            if kind is not None:
                return kind
        return None
    if not isinstance(layout, str):
        return None
    name = layout.strip().lower().replace("-", "_")
    if name in KINDS:
        return name  # type: ignore[return-value]
    # Whole words and their letter runs: "math500" and "aime_2024" name their family.
    words = set(re.split(r"[^a-z0-9]+", name)) | set(re.findall(r"[a-z]+", name))
    for kind, known in _LAYOUT_WORDS:
        if words & set(known):
            return kind
    return None


def ability_for(kind: Kind | None) -> str:
    """verl's `ability` for a kind of task."""
    return kind if kind is not None else DEFAULT_ABILITY
