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
import difflib
import json
from collections.abc import Mapping, Sequence
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

    @classmethod
    def assignments(cls, pairs: Sequence[str], *, backend: str) -> dict[str, Any]:
        """Option values from `NAME=VALUE` strings (`curate eval --option`): each NAME an
        option of this schema (`-` may stand for `_`), each VALUE read as the option's
        type. UsageError naming the pair for an unknown name (with the closest names),
        a name given twice, or a value of the wrong type; ranges are checked by `parse`."""
        values: dict[str, Any] = {}
        names = cls.names()
        for pair in pairs:
            name, sep, text = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or not name:
                raise UsageError(f"--option {pair!r}: expected NAME=VALUE")
            if name not in names:
                close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
                hint = f"did you mean {' or '.join(close)}? " if close else ""
                raise UsageError(
                    f"--option {name}: not an option of --backend {backend} ({hint}"
                    f"choose from {', '.join(names) or 'none: it takes no options'})"
                )
            if name in values:
                raise UsageError(f"--option {name}: given twice")
            values[name] = _value(cls._field(name), text.strip(), pair)
        return values

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


def _value(field: dataclasses.Field[Any], text: str, pair: str) -> Any:
    """`text` read as the type the schema field declares (its annotation's text, as
    `from __future__ import annotations` keeps it): a number, a boolean, None where
    the option allows it, JSON for a list, tuple or mapping, else the text itself."""
    kind = str(field.type).replace(" ", "")
    alternatives = kind.split("|")
    if "None" in alternatives and text.lower() in ("none", "null"):
        return None
    first = alternatives[0]
    try:
        if first == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError(text)
            return lowered in ("true", "1", "yes", "on")
        if first == "int":
            return int(text)
        if first == "float":
            return float(text)
        if first.startswith(("tuple", "list", "Mapping", "dict", "Sequence")):
            value = json.loads(text)
            return tuple(value) if first.startswith("tuple") and isinstance(value, list) else value
    except ValueError:
        wanted = {"bool": "true or false", "int": "a whole number", "float": "a number"}
        raise UsageError(
            f"--option {pair!r}: expected {wanted.get(first, 'JSON (a list or an object)')}"
        ) from None
    return text


def flag_name(name: str) -> str:
    """The command-line flag of an option name."""
    return "--" + name.replace("_", "-")
