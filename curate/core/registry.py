"""The one registry shape behind backends, graders and export formats.

Entries are named and imported only when chosen (``"module:attribute"``), so listing
the names (for `--help`) never imports vllm, torch or polars. A missing optional
dependency becomes one line naming the extra to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from curate.errors import MissingExtraError, UsageError

T = TypeVar("T")


def did_you_mean(name: str, names: Iterable[str]) -> str | None:
    """The name closest to a mistyped one (case aside), or None when none is close
    (difflib's similarity ratio of at least 0.6)."""
    import difflib

    folded = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.strip().lower(), list(folded), n=1)
    return folded[close[0]] if close else None


def _unknown_name(kind: str, name: str, names: list[str]) -> str:
    close = did_you_mean(name, names)
    hint = f"; did you mean '{close}'?" if close else ""
    return f"unknown {kind} '{name}'{hint} (choose from {', '.join(names)})"


@dataclass(frozen=True, slots=True)
class Entry:
    """A registered name: where its object lives, what it is for, what to install."""

    name: str
    target: str  # "package.module:attribute"
    help: str = ""
    install_hint: str = ""


class Registry(Generic[T]):
    """Names -> lazily imported objects of one kind ("backend", "grader", "format").

    `normalise` maps what a user typed to a key (say, case-folding); `unknown` words
    the error for a name that is not registered.
    """

    def __init__(
        self,
        kind: str,
        *,
        normalise: Callable[[str], str] = str.strip,
        unknown: Callable[[str, list[str]], str] | None = None,
    ) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self._loaded: dict[str, T] = {}
        self._normalise = normalise
        self._unknown = unknown or (lambda name, names: _unknown_name(kind, name, names))

    def add(self, name: str, target: str, *, help: str = "", install_hint: str = "") -> None:
        """Register (or replace) `name` as the object at `target`, imported on first use."""
        self._entries[name] = Entry(name, target, help, install_hint)
        self._loaded.pop(name, None)

    def register(self, name: str, obj: T, *, help: str = "") -> None:
        """Register (or replace) an object that is already loaded."""
        self._entries[name] = Entry(name, f"{type(obj).__module__}:<object>", help)
        self._loaded[name] = obj

    def names(self) -> list[str]:
        return list(self._entries)

    def entries(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._normalise(name) in self._entries

    def entry(self, name: str) -> Entry:
        try:
            return self._entries[self._normalise(name)]
        except KeyError:
            raise UsageError(self._unknown(name, self.names())) from None

    def get(self, name: str) -> T:
        """The object registered as `name`, imported now if it was not yet."""
        entry = self.entry(name)
        if entry.name in self._loaded:
            return self._loaded[entry.name]
        module_name, _, attr = entry.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("curate"):
                raise  # curate's own module is missing: a bug, not an extra
            missing = exc.name or "a dependency"
            hint = f": {entry.install_hint}" if entry.install_hint else ""
            raise MissingExtraError(
                f"the {entry.name} {self.kind} needs '{missing}', which is not installed{hint}"
            ) from exc
        obj: T = getattr(module, attr)
        self._loaded[entry.name] = obj
        return obj
