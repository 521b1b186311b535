"""Option schemas: a component (a backend, a grader kind) declares its options once, as a
frozen dataclass whose fields carry the default, the allowed range and the help text.

The same schema serves every reader: the component's factory receives the validated
object, the run manifest records the options the caller set (`record()`), the CLI's
dedicated flags take help, range and default from the field metadata, and the generic
escape hatch `curate eval -O NAME=VALUE` reads a value as the field's type
(`assignments`). A schema imports nothing heavy, so the CLI can read it for `--help`.

`curate.backends.options.BackendOptions` is the backends' schema base; a grader kind's
factory names its schema in an `options` attribute (`curate.graders.registry`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from curate.errors import UsageError


def option(
    default: Any = MISSING,
    help: str = "",
    *,
    min: float | None = None,
    max: float | None = None,
    default_help: str | None = None,
    flag: bool = True,
    cli: str | None = None,
    settable: bool = True,
) -> Any:
    """A schema field: `default` (none: the option is required), the help line, an
    inclusive range, how to word the default in help text (`default_help`), whether
    `curate eval` has a dedicated flag for it (`flag`), that flag's spelling when it is
    not the schema's prefix plus the name (`cli`), and whether `-O NAME=VALUE` may set
    it (`settable`: False for what the program sets itself, say a cache path)."""
    meta = {
        "help": help,
        "min": min,
        "max": max,
        "default_help": default_help,
        "flag": flag,
        "cli": cli,
        "settable": settable,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionSchema:
    """Base of every option schema. Construction validates; `parse` builds one from a
    mapping of given values and remembers which were given."""

    # Short name used in help text and errors ("vLLM", "openai", "judge").
    label: ClassVar[str] = ""
    # How the options' flags are spelled: "--" + name, or "--judge-" + name.
    flag_prefix: ClassVar[str] = "--"

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
    def settable_names(cls) -> list[str]:
        """The options `-O NAME=VALUE` may set."""
        return [f.name for f in cls.schema() if f.metadata.get("settable", True)]

    @classmethod
    def required(cls) -> list[str]:
        """The options without a default."""
        return [
            f.name
            for f in cls.schema()
            if f.default is MISSING and f.default_factory is MISSING  # type: ignore[misc]
        ]

    @classmethod
    def flag(cls, name: str) -> str:
        """The command-line flag that sets option `name`."""
        f = cls._field(name)
        return str(f.metadata.get("cli") or cls.flag_prefix + name.replace("_", "-"))

    @classmethod
    def parse(cls, values: Mapping[str, Any] | OptionSchema | None) -> Self:
        """Validated options from a mapping of given values (or the object itself)."""
        if isinstance(values, cls):
            return values
        if isinstance(values, OptionSchema):
            raise UsageError(f"{type(values).__name__} are not options of {cls.label}")
        values = dict(values or {})
        unknown = [k for k in values if k not in cls.names()]
        if unknown:
            raise UsageError(
                f"unknown {cls.label} option(s): {', '.join(unknown)} "
                f"(choose from {', '.join(cls.names())})"
            )
        missing = [name for name in cls.required() if values.get(name) is None]
        if missing:
            raise UsageError(f"{cls.label} needs {', '.join(cls.flag(n) for n in missing)}")
        options = cls(**values)
        object.__setattr__(options, "given", tuple(n for n in cls.names() if n in values))
        return options

    def validate(self) -> None:
        """Check every numeric option against its range; UsageError naming the flag."""
        for f in self.schema():
            value, low, high = getattr(self, f.name), f.metadata.get("min"), f.metadata.get("max")
            if value is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if low is not None and value < low:
                raise UsageError(f"{self.flag(f.name)} must be at least {low:g}, not {value!r}")
            if high is not None and value > high:
                raise UsageError(f"{self.flag(f.name)} must be at most {high:g}, not {value!r}")

    def record(self) -> dict[str, Any]:
        """The options the caller set, by name (never a secret: keys stay in variables)."""
        return {name: getattr(self, name) for name in self.given}

    @classmethod
    def assignments(
        cls, pairs: Sequence[str], *, owner: str, qualifier: str = ""
    ) -> dict[str, Any]:
        """Option values from `NAME=VALUE` strings (`curate eval --option`): each NAME a
        settable option of this schema (`-` may stand for `_`; `qualifier` is the prefix
        the user wrote before it, "judge." for a grader's, kept in messages), each VALUE
        read as the option's type. UsageError naming the pair for an unknown name (with
        the closest names and `owner`, say "--backend vllm"), a name given twice, or a
        value of the wrong type; ranges are checked when the options are built."""
        values: dict[str, Any] = {}
        names = cls.settable_names()
        for pair in pairs:
            name, sep, text = pair.partition("=")
            name = name.strip().removeprefix(qualifier).replace("-", "_")
            if not sep or not name:
                raise UsageError(f"--option {pair!r}: expected NAME=VALUE")
            if name not in names:
                close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
                hint = (
                    f"did you mean {' or '.join(qualifier + c for c in close)}? " if close else ""
                )
                choices = ", ".join(qualifier + n for n in names) or "none: it takes no options"
                raise UsageError(
                    f"--option {qualifier}{name}: not an option of {owner} ({hint}"
                    f"choose from {choices})"
                )
            if name in values:
                raise UsageError(f"--option {qualifier}{name}: given twice")
            values[name] = read_value(cls._field(name), text.strip(), pair)
        return values

    @classmethod
    def _field(cls, name: str) -> dataclasses.Field[Any]:
        return next(f for f in cls.schema() if f.name == name)


def read_value(field: dataclasses.Field[Any], text: str, pair: str) -> Any:
    """`text` read as the type the schema field declares (its annotation's text, as
    `from __future__ import annotations` keeps it): a number, a boolean, None where
    the option allows it, a path, JSON for a list, tuple or mapping, else the text itself."""
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
        if first == "Path":
            return Path(text)
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
