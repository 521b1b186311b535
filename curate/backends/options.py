"""Backend option schemas: each backend declares its options once, as a frozen
dataclass whose fields carry the default, the allowed range and the help text
(`curate.core.options`, shared with the grader kinds' schemas).

The same schema serves three readers: the factory (`open_vllm(model, options)`
receives the validated object), the run manifest (`record()`: the options the
caller set, under their own names) and `curate eval`'s flags (help, range and
default come from the field metadata). Schemas import nothing heavy, so the CLI can
read them for `--help` without loading an engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from curate.core.options import OptionSchema, flag_name, option

__all__ = ["BackendOptions", "flag_name", "option"]


@dataclass(frozen=True)
class BackendOptions(OptionSchema):
    """Base of every backend's options. Construction validates; `parse` builds one
    from a mapping (say, `EvalOptions.engine_options`) and remembers what was given."""

    # The help panel of the backend's flags (None: the main list).
    panel: ClassVar[str | None] = None
    # True: the flags default to None, so that only options typed on the command line
    # reach the manifest; the default is then stated in the help text instead.
    flags_default_to_none: ClassVar[bool] = False

    @classmethod
    def assignments(  # type: ignore[override]
        cls, pairs: Sequence[str], *, backend: str
    ) -> dict[str, Any]:
        """Option values from `NAME=VALUE` strings (`curate eval --option`), read by the
        schema (`OptionSchema.assignments`); errors name `--backend BACKEND`."""
        return super().assignments(pairs, owner=f"--backend {backend}")

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
