"""User-defined graders: ``python:FILE.py:FUNCTION`` or ``python:module:function``.

The function is called as ``fn(completion, reference)`` and must return a float in
[0, 1] or a bool (True -> 1.0, False -> 0.0; numpy floats and bools work too).

What a user should know:

* `completion` has had its reasoning block removed (`curate.graders.text.strip_think`);
  a completion with an unclosed ``<think>`` scores 0.0 without calling the function.
  `reference` is passed as stored (a string, a number, a list...).
* A return value that is not a number/bool, is NaN, or is outside [0, 1], and any
  exception raised by the function, make an error row for that rollout
  (``TypeName: message``, one line, at most ~200 characters); other rollouts go on.
  `extracted` is always None: the function only returns a score.
* The function runs in the main process, one rollout at a time, with no timeout.
* Loading happens when the spec is parsed, so a missing file, a module that fails to
  import, or a missing/non-callable function is a `UsageError` before any rollout runs.
  A spec whose target ends in ``.py`` or contains a path separator is a file (relative
  to the current directory), loaded as a standalone module; anything else is imported
  as a module from ``sys.path``. The split is at the last ``:``, so Windows paths work.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import numbers
import os
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from types import ModuleType

from curate.errors import UsageError
from curate.graders.base import GradeResult, GradingError, InProcessGrader, describe_exception

UserFunction = Callable[[str, object], object]

SPEC_FORMS = "python:FILE.py:FUNCTION or python:module:function"


def _is_file_target(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _load_file(path_text: str, spec: str) -> ModuleType:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise UsageError(f"grader {spec!r}: file not found: {path}")
    resolved = path.resolve()
    # A stable, unique name: two files called graders.py must not share a module.
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_name = f"_curate_user_grader_{resolved.stem}_{digest}"
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"grader {spec!r}: cannot load {path} as Python")
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running so dataclasses / pickling inside the file can find it.
    sys.modules[module_name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise UsageError(
            f"grader {spec!r}: error while loading {path}: {describe_exception(exc)}"
        ) from exc
    return module


def _import_module(name: str, spec: str) -> ModuleType:
    if not all(part.isidentifier() for part in name.split(".")):
        raise UsageError(f"grader {spec!r}: {name!r} is not a module name or a .py file")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise UsageError(
                f"grader {spec!r}: no module named {name!r} on sys.path "
                f"(pass a file instead: python:path/to/{name.split('.')[-1]}.py:FUNCTION)"
            ) from exc
        raise UsageError(
            f"grader {spec!r}: importing {name!r} failed: {describe_exception(exc)}"
        ) from exc
    except Exception as exc:
        raise UsageError(
            f"grader {spec!r}: importing {name!r} failed: {describe_exception(exc)}"
        ) from exc


def load_user_function(spec: str) -> UserFunction:
    """Resolve a ``python:...`` spec to a callable, or raise `UsageError` naming the spec."""
    _, _, rest = spec.partition(":")
    target, sep, function_name = rest.rpartition(":")
    target, function_name = target.strip(), function_name.strip()
    if not sep or not target or not function_name:
        raise UsageError(f"grader {spec!r}: expected {SPEC_FORMS}")
    if not function_name.isidentifier():
        raise UsageError(f"grader {spec!r}: {function_name!r} is not a function name")
    module = _load_file(target, spec) if _is_file_target(target) else _import_module(target, spec)
    function = getattr(module, function_name, None)
    if function is None:
        raise UsageError(f"grader {spec!r}: {target} has no function {function_name!r}")
    if not callable(function):
        raise UsageError(f"grader {spec!r}: {target}.{function_name} is not callable")
    if inspect.iscoroutinefunction(function):
        raise UsageError(f"grader {spec!r}: {function_name} is async; it must be a plain function")
    try:
        inspect.signature(function).bind("completion", "reference")
    except TypeError as exc:
        raise UsageError(
            f"grader {spec!r}: {function_name} must accept (completion, reference): {exc}"
        ) from exc
    except ValueError:
        pass  # no introspectable signature (some builtins): find out when it is called
    return function


def coerce_score(value: object) -> float:
    """A user function's return value as a score, or `GradingError` if it is not one."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ in {"bool_", "bool"}:
        return 1.0 if bool(value) else 0.0
    if isinstance(value, numbers.Real | Decimal):
        score = float(value)
    else:
        raise GradingError(
            f"python grader returned {kind.__name__}; expected a float in [0, 1] or a bool"
        )
    if math.isnan(score):
        raise GradingError("python grader returned NaN; expected a float in [0, 1] or a bool")
    if not 0.0 <= score <= 1.0:
        raise GradingError(f"python grader returned {score!r}, outside [0, 1]")
    return score


class PythonGrader(InProcessGrader):
    """Calls a user function per rollout."""

    def __init__(self, name: str, function: UserFunction) -> None:
        super().__init__(name)
        self.function = function

    def grade_one(self, answer_text: str, reference: object) -> GradeResult:
        return GradeResult(
            score=coerce_score(self.function(answer_text, reference)), extracted=None
        )
