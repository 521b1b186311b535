"""The one registry shape behind backends, graders and export formats.

Entries are named and imported only when chosen (``"module:attribute"``), so listing
the names (for `--help`) never imports vllm, torch or polars. A missing optional
dependency becomes one line naming the extra to install.

Other packages add entries through entry points (a registry's `group`, say
``curate.graders``): the installed distributions are scanned on the first lookup or
listing, never at import (so never for `curate --help`), and a plugin's module is
imported only when its name is chosen. A built-in name wins over a plugin's, with a
warning; a plugin that fails to import is one line naming it and its package.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from curate.errors import MissingExtraError, UsageError

T = TypeVar("T")

log = logging.getLogger(__name__)


def did_you_mean(name: str, names: Iterable[str]) -> str | None:
    """The name closest to a mistyped one (case aside), or None when none is close
    (difflib's similarity ratio of at least 0.6)."""

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
    plugin: str | None = None  # the distribution that registered it (None: built in)


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
        group: str | None = None,
    ) -> None:
        self.kind = kind
        self.group = group  # the entry-point group plugins register under
        self._entries: dict[str, Entry] = {}
        self._loaded: dict[str, T] = {}
        self._normalise = normalise
        self._scanned = group is None
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
        return list(self._all())

    def entries(self) -> Iterator[Entry]:
        return iter(self._all().values())

    def plugins(self) -> list[Entry]:
        """The entries other packages registered, in the order they were found."""
        return [e for e in self._all().values() if e.plugin is not None]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._normalise(name) in self._all()

    def entry(self, name: str) -> Entry:
        try:
            return self._all()[self._normalise(name)]
        except KeyError:
            raise UsageError(self._unknown(name, self.names())) from None

    def _all(self) -> dict[str, Entry]:
        """The entries, the installed plugins' included (scanned on first use)."""
        if not self._scanned:
            self._scanned = True
            self._scan()
        return self._entries

    def _scan(self) -> None:
        # Here rather than at the top: reading every installed distribution's metadata
        # is startup time that `curate --help` must not pay.
        from importlib.metadata import entry_points

        for point in entry_points(group=str(self.group)):
            name = self._normalise(point.name)
            package = point.dist.name if point.dist is not None else point.value
            known = self._entries.get(name)
            if known is not None:
                owner = f"the {known.plugin} package's" if known.plugin else "the built-in"
                log.warning(
                    "the %s package's %s '%s' is ignored: %s one has that name",
                    package,
                    self.kind,
                    name,
                    owner,
                )
                continue
            self._entries[name] = Entry(
                name, point.value, help=f"from the {package} package", plugin=package
            )

    def get(self, name: str) -> T:
        """The object registered as `name`, imported now if it was not yet."""
        entry = self.entry(name)
        if entry.name in self._loaded:
            return self._loaded[entry.name]
        obj = self._load_plugin(entry) if entry.plugin is not None else self._load(entry)
        self._loaded[entry.name] = obj
        return obj

    def _load(self, entry: Entry) -> T:
        module_name, _, attr = entry.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] == "curate":
                raise  # curate's own module is missing: a bug, not an extra
            missing = exc.name or "a dependency"
            hint = f": {entry.install_hint}" if entry.install_hint else ""
            raise MissingExtraError(
                f"the {entry.name} {self.kind} needs '{missing}', which is not installed{hint}"
            ) from exc
        obj: T = functools.reduce(getattr, attr.split("."), module) if attr else module  # type: ignore[assignment]
        return obj

    def _load_plugin(self, entry: Entry) -> T:
        """A plugin's object; whatever its import raises is one line naming it."""
        try:
            return self._load(entry)
        except MissingExtraError as exc:
            raise MissingExtraError(f"{exc} (a plugin from the {entry.plugin} package)") from exc
        except Exception as exc:
            raise UsageError(
                f"the {entry.name} {self.kind} of the {entry.plugin} package cannot be loaded "
                f"from {entry.target}: {type(exc).__name__}: {exc}"
            ) from exc
