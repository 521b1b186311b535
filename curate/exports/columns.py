"""Which input columns an export carries, and under which names.

Every column of the input survives into every export. A trainer format writes some
fields of its own (`prompt`, `solution`, `label`, ...); an input column of the same name
is either that very field (the prompt column the run read its prompts from, the
reference column, a `data_source` column the export uses) and is not written twice, or
something else, which is kept under `input_<name>` (`input_input_<name>` if that is
taken too) and named in one line on the terminal. Nothing is overwritten silently.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

INPUT_PREFIX: Final = "input_"

# What a format's own field holds; an input column playing the same role is that field.
Role = Literal["messages", "prompt_text", "answer", "data_source", "ability", "verl"]
PROMPT_ROLES: Final[tuple[Role, ...]] = ("messages", "prompt_text")


@dataclass(frozen=True)
class Carried:
    """One input column in an export: its name in the input and in the export."""

    column: str
    name: str

    @property
    def renamed(self) -> bool:
        return self.column != self.name


def free_name(column: str, taken: Collection[str]) -> str:
    """`column`, or `input_column` (prefixed again while taken)."""
    name = column
    while name in taken:
        name = INPUT_PREFIX + name
    return name


def carry(
    columns: Sequence[str],
    roles: Mapping[str, Role],
    *,
    absorbs: Mapping[str, Collection[Role]],
    taken: Collection[str],
) -> list[Carried]:
    """The input `columns` to write, each with its name in the export.

    `roles` maps input columns to the role they played in the run; `absorbs` maps the
    format's own fields to the roles each stands for: an input column whose name is
    such a field, in one of those roles, is that field and is left out. Any other column whose
    name is `taken` (the names beside which the columns are written) is renamed.
    """
    used = set(taken)
    out: list[Carried] = []
    for column in columns:
        role = roles.get(column)
        if role is not None and role in absorbs.get(column, ()):
            continue
        name = free_name(column, used)
        used.add(name)
        out.append(Carried(column, name))
    return out


def renamed_note(fmt: str, carried: Sequence[Carried], *, where: str = "") -> str | None:
    """One line naming the input columns kept under another name, or None."""
    moved = [c for c in carried if c.renamed]
    if not moved:
        return None
    pairs = ", ".join(f"'{c.column}' as '{c.name}'" for c in moved)
    what, why = (
        ("column", "a field of that name")
        if len(moved) == 1
        else (
            "columns",
            "fields of those names",
        )
    )
    return f"{fmt}: kept the input's {what} {pairs}{where} ({fmt} writes {why})"
