"""Backend option schemas: each backend declares its options once, as a frozen
dataclass whose fields carry the default, the allowed range and the help text.

The same schema serves three readers: the factory (`open_vllm(model, options)`
receives the validated object), the run manifest (`record()`: the options the
caller set, under their own names) and `curate eval`'s flags (help, range and
default come from the field metadata). Schemas import nothing heavy, so the CLI can
read them for `--help` without loading an engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from curate.errors import UsageError


def option(
    default: Any,
    help: str,
    *,
    min: float | None = None,
    max: float | None = None,
    default_help: str | None = None,
    flag: bool = True,
) -> Any:
    """A schema field: `default`, the help line, an inclusive range, how to word the
    default in help text (`default_help`), and whether `curate eval` has a flag for it."""
    meta = {"help": help, "min": min, "max": max, "default_help": default_help, "flag": flag}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class BackendOptions:
    """Base of every backend's options. Construction validates; `parse` builds one
    from a mapping (say, `EvalOptions.engine_options`) and remembers what was given."""

    # Short name used in help text and errors ("vLLM", "openai").
    label: ClassVar[str] = ""
    # The help panel of the backend's flags (None: the main list).
    panel: ClassVar[str | None] = None
    # True: the flags default to None, so that only options typed on the command line
    # reach the manifest; the default is then stated in the help text instead.
    flags_default_to_none: ClassVar[bool] = False

    # The options set by the caller, in field order (what the manifest records).
    given: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Built directly, an option counts as given when it differs from its default.
        given = tuple(f.name for f in self.schema() if getattr(self, f.name) != f.default)
        object.__setattr__(self, "given", given)
        self.validate()

    @classmethod
    def schema(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The option fields, in declaration order."""
        return tuple(f for f in dataclasses.fields(cls) if f.init)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in cls.schema()]

    @classmethod
    def parse(cls, values: Mapping[str, Any] | BackendOptions | None) -> Self:
        """Validated options from a mapping of given values (or the object itself)."""
        if isinstance(values, cls):
            return values
        if isinstance(values, BackendOptions):
            raise UsageError(f"{type(values).__name__} are not options of {cls.label}")
        values = dict(values or {})
        unknown = [k for k in values if k not in cls.names()]
        if unknown:
            raise UsageError(
                f"unknown {cls.label} option(s): {', '.join(unknown)} "
                f"(choose from {', '.join(cls.names())})"
            )
        options = cls(**values)
        object.__setattr__(options, "given", tuple(n for n in cls.names() if n in values))
        return options

    def validate(self) -> None:
        """Check every numeric option against its range; raise UsageError naming the flag."""
        for f in self.schema():
            value, low, high = getattr(self, f.name), f.metadata["min"], f.metadata["max"]
            if value is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if low is not None and value < low:
                raise UsageError(f"{flag_name(f.name)} must be at least {low:g}, not {value!r}")
            if high is not None and value > high:
                raise UsageError(f"{flag_name(f.name)} must be at most {high:g}, not {value!r}")

    def record(self) -> dict[str, Any]:
        """The manifest's `engine_options`: the given options by name (never a secret)."""
        return {name: getattr(self, name) for name in self.given}

    # -- what `curate eval` reads -------------------------------------------
    @classmethod
    def flag_fields(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in cls.schema() if f.metadata["flag"]]

    @classmethod
    def flag_default(cls, name: str) -> Any:
        """The flag's default: the schema's, or None when only typed flags are recorded."""
        return None if cls.flags_default_to_none else cls._field(name).default

    @classmethod
    def flag_help(cls, name: str) -> str:
        """'label: help (default: X).' — the default spelled out when the flag hides it."""
        f = cls._field(name)
        text = f"{cls.label}: {f.metadata['help']}"
        shown = f.metadata["default_help"]
        if shown is None and cls.flags_default_to_none and f.default is not None:
            shown = f"{f.default:g}" if isinstance(f.default, float) else str(f.default)
        return f"{text} (default: {shown})." if shown else f"{text}."

    @classmethod
    def flag_range(cls, name: str) -> dict[str, Any]:
        f = cls._field(name)
        return {k: f.metadata[k] for k in ("min", "max") if f.metadata[k] is not None}

    @classmethod
    def _field(cls, name: str) -> dataclasses.Field[Any]:
        return next(f for f in cls.schema() if f.name == name)


def flag_name(name: str) -> str:
    """The command-line flag of an option name."""
    return "--" + name.replace("_", "-")
