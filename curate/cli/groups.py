"""Option groups for typer commands: a command with many options takes them as a few
typed groups (a dataclass each, its fields written as typer parameters) instead of one
long parameter list.

typer reads a command's options from its function's signature only, so `grouped`
gives the function the signature typer expects (every field of every group, as a plain
parameter) and, on each call, builds the groups from the parsed values before calling
the function. The options, their help, panels and defaults are exactly those the fields
declare; `panels` orders the help panels, so that grouping the options by what they do
does not reorder `--help`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

R = TypeVar("R")

# typer's title of the options without a help panel.
MAIN_PANEL = None


def _panel(param: inspect.Parameter) -> str | None:
    for meta in getattr(param.annotation, "__metadata__", ()):
        panel = getattr(meta, "rich_help_panel", None)
        if panel is not None:
            return str(panel)
    return MAIN_PANEL


def _is_group(annotation: object) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


def grouped(
    panels: Sequence[str | None] = (),
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorator: each parameter of the command annotated with a dataclass (a group)
    becomes that dataclass's fields, in place; the command receives the group built from
    them. `panels`: the order of the help panels (typer prints them in the order of
    their first option); the options keep their order within each panel."""

    def decorate(func: Callable[..., R]) -> Callable[..., R]:
        own = inspect.signature(func, eval_str=True)
        groups: dict[str, tuple[type, list[str]]] = {}
        params: list[inspect.Parameter] = []
        for param in own.parameters.values():
            if not _is_group(param.annotation):
                params.append(param)
                continue
            cls = param.annotation
            hints = typing.get_type_hints(cls, include_extras=True)
            names = [f.name for f in dataclasses.fields(cls)]
            groups[param.name] = (cls, names)
            for f in dataclasses.fields(cls):
                default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
                params.append(
                    inspect.Parameter(
                        f.name,
                        inspect.Parameter.POSITIONAL_OR_KEYWORD,
                        annotation=hints[f.name],
                        default=default,
                    )
                )
        taken = [p.name for p in params]
        clash = {name for name in taken if taken.count(name) > 1}
        if clash:
            raise TypeError(f"{func.__name__}: options declared twice: {sorted(clash)}")
        order = {panel: i for i, panel in enumerate(panels)}
        # Arguments first, as declared (typer reads positionals in this order); then
        # options by panel, each panel's in declaration order (a stable sort).
        arguments = [p for p in params if p.default is inspect.Parameter.empty]
        options = [p for p in params if p.default is not inspect.Parameter.empty]
        options.sort(key=lambda p: order.get(_panel(p), len(order)))
        # Keyword-only: typer passes every value by name, and a group's fields may
        # follow options with defaults.
        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in [*arguments, *options]]
        signature = own.replace(parameters=keyword)

        @functools.wraps(func)
        def command(**values: Any) -> R:
            for name, (cls, names) in groups.items():
                values[name] = cls(**{n: values.pop(n) for n in names})
            return func(**values)

        command.__signature__ = signature  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {
            "return": own.return_annotation
        }
        return command

    return decorate
