"""Grader specs: the one place that maps a spec string to a grader.

Specs (the part before the first ``:`` is case-insensitive; the rest is kept verbatim):

* ``exact``
* ``numeric``, ``numeric:rel_tol=1e-4``, ``numeric:abs_tol=0.01``,
  ``numeric:rel_tol=0,abs_tol=0.5`` (defaults rel_tol=1e-4, abs_tol=0)
* ``math`` (needs the ``math`` extra)
* ``regex:PATTERN`` (everything after the first ``:``, so the pattern may contain ``:``)
* ``python:FILE.py:FUNCTION`` / ``python:module:function``

Surrounding whitespace is dropped from the whole spec (write ``\\s`` or ``[ ]`` for a
pattern that must end in a space). A bad spec raises `UsageError` naming it.
``Grader.name`` is the spec as given (without surrounding whitespace), for the run
manifest.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Sequence

from curate.errors import MissingExtraError, UsageError
from curate.graders.base import Grader
from curate.graders.custom import PythonGrader, load_user_function
from curate.graders.mathverify import MathGrader
from curate.graders.numeric import Tolerance, reference_number
from curate.graders.simple import ExactGrader, NumericGrader, RegexGrader

GRADER_NAMES: tuple[str, ...] = (
    "exact",
    "numeric",
    "math",
    "regex:PATTERN",
    "python:FILE.py:FUNCTION",
    "python:module:function",
)

MATH_EXTRA_HINT = "install the math extra: pip install 'curate[math]'"


def _unknown(spec: str) -> UsageError:
    return UsageError(f"unknown grader {spec!r}; expected one of: {', '.join(GRADER_NAMES)}")


def _parse_tolerance(spec: str, options: str) -> Tolerance:
    values: dict[str, float] = {}
    for item in options.split(","):
        key, sep, raw = (part.strip() for part in item.partition("="))
        if not sep or key not in {"rel_tol", "abs_tol"}:
            raise UsageError(
                f"grader {spec!r}: expected numeric:rel_tol=X and/or abs_tol=Y, "
                f"got {item.strip()!r}"
            )
        if key in values:
            raise UsageError(f"grader {spec!r}: {key} given twice")
        try:
            value = float(raw)
        except ValueError:
            raise UsageError(f"grader {spec!r}: {key} must be a number, got {raw!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise UsageError(f"grader {spec!r}: {key} must be a finite number >= 0, got {raw!r}")
        values[key] = value
    return Tolerance(**values)


def _math_grader(spec: str, timeout_s: float) -> MathGrader:
    if importlib.util.find_spec("math_verify") is None:
        raise MissingExtraError(f"grader {spec!r} needs the math_verify package; {MATH_EXTRA_HINT}")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise UsageError(f"grader {spec!r}: the timeout must be a positive number of seconds")
    return MathGrader(spec, timeout_s=timeout_s)


def get_grader(spec: str, *, timeout_s: float = 10.0) -> Grader:
    """Build the grader a spec names. `timeout_s` is the per-item limit of `math`."""
    spec = spec.strip()
    if not spec:
        raise UsageError(f"empty grader spec; expected one of: {', '.join(GRADER_NAMES)}")
    kind, sep, argument = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "exact" and not sep:
        return ExactGrader(spec)
    if kind == "numeric":
        if sep and not argument.strip():
            raise UsageError(f"grader {spec!r}: nothing after 'numeric:'")
        tolerance = _parse_tolerance(spec, argument) if sep else Tolerance()
        return NumericGrader(spec, tolerance)
    if kind == "math" and not sep:
        return _math_grader(spec, timeout_s)
    if kind == "regex":
        if not argument:
            raise UsageError(f"grader {spec!r}: expected regex:PATTERN with a non-empty pattern")
        try:
            pattern = re.compile(argument)
        except re.error as exc:
            raise UsageError(f"grader {spec!r}: invalid regular expression: {exc}") from exc
        return RegexGrader(spec, pattern)
    if kind == "python":
        return PythonGrader(spec, load_user_function(spec))
    if kind in {"exact", "math"}:
        raise UsageError(f"grader {spec!r}: {kind!r} takes no options")
    raise _unknown(spec)


def default_grader_spec(references: Sequence[object]) -> str:
    """``"numeric"`` when every reference is a number (or a string that is exactly one
    number, e.g. "1,234", "12%", "$5", "(45)", "3/4"), else ``"exact"``. No references
    means ``"exact"``."""
    if len(references) == 0:
        return "exact"
    if all(reference_number(reference, strict=True) is not None for reference in references):
        return "numeric"
    return "exact"
