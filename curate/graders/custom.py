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
* The function runs in worker processes (`curate.graders.pool`), each call in a
  worker's main thread with a deadline of `timeout_s` seconds: a hang, a crash of the
  worker, or a timeout is that rollout's error row, never a 0. So the function, its
  module and `reference` must be importable/picklable in a fresh interpreter (a file is
  loaded again by path there; a module by name, with the parent's ``sys.path``).
* `score_range=(lo, hi)` declares a continuous reward: the returned number, which must
  lie in that range, is mapped onto [0, 1] and kept as `GradeResult.raw_score`.
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
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from curate.errors import UsageError
from curate.graders.base import (
    DEFAULT_TIMEOUT_S,
    GradeResult,
    GraderOptions,
    ScoreRange,
    describe_exception,
    reward_value,
    scored,
)
from curate.graders.pool import DEFAULT_WORKERS, PooledGrader, check_timeout

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


@dataclass(frozen=True, slots=True)
class UserTarget:
    """Where a user's function lives, in a form a worker process can load it from."""

    spec: str  # as the user wrote it, for messages
    written: str  # the file or module as the user wrote it, for messages
    location: str  # an absolute file path, or a module name
    is_file: bool
    function: str


def parse_target(spec: str, forms: str = SPEC_FORMS) -> UserTarget:
    """The ``KIND:FILE.py:FUNCTION`` / ``KIND:module:function`` part of a spec, checked for
    shape only. `forms` is what the error message says a spec should look like."""
    _, _, rest = spec.partition(":")
    target, sep, function_name = rest.rpartition(":")
    target, function_name = target.strip(), function_name.strip()
    if not sep or not target or not function_name:
        raise UsageError(f"grader {spec!r}: expected {forms}")
    if not function_name.isidentifier():
        raise UsageError(f"grader {spec!r}: {function_name!r} is not a function name")
    if _is_file_target(target):
        # Absolute, so a worker started after a chdir still finds the same file.
        location = str(Path(target).expanduser().absolute())
        return UserTarget(spec, target, location, True, function_name)
    return UserTarget(spec, target, target, False, function_name)


def load_target(target: UserTarget) -> Callable[..., object]:
    """Import the target's module and return its function, or raise `UsageError`."""
    spec, shown = target.spec, target.written
    if target.is_file:
        # Messages name the file as written, unless the working directory has changed.
        same_place = str(Path(shown).expanduser().absolute()) == target.location
        module = _load_file(shown if same_place else target.location, spec)
    else:
        module = _import_module(target.location, spec)
    function = getattr(module, target.function, None)
    if function is None:
        raise UsageError(f"grader {spec!r}: {shown} has no function {target.function!r}")
    if not callable(function):
        raise UsageError(f"grader {spec!r}: {shown}.{target.function} is not callable")
    if inspect.iscoroutinefunction(function):
        raise UsageError(
            f"grader {spec!r}: {target.function} is async; it must be a plain function"
        )
    return function


def check_signature(
    spec: str,
    function: Callable[..., object],
    *args: Any,
    partial: bool = False,
    **kwargs: Any,
) -> None:
    """`UsageError` unless `function` can be called with arguments shaped like these
    (with `partial`, and perhaps more keywords)."""
    try:
        signature = inspect.signature(function)
        if partial:
            signature.bind_partial(*args, **kwargs)
        else:
            signature.bind(*args, **kwargs)
    except TypeError as exc:
        shape = ", ".join([*map(str, args), *kwargs])
        name = getattr(function, "__name__", "the function")
        raise UsageError(f"grader {spec!r}: {name} must accept ({shape}): {exc}") from exc
    except ValueError:
        pass  # no introspectable signature (some builtins): find out when it is called


def load_user_function(spec: str) -> UserFunction:
    """Resolve a ``python:...`` spec to a callable, or raise `UsageError` naming the spec."""
    function = load_target(parse_target(spec))
    check_signature(spec, function, "completion", "reference")
    return function


# Functions a worker process has loaded, by target (each worker loads each target once).
_LOADED: dict[UserTarget, Callable[..., object]] = {}


def target_function(target: UserTarget) -> Callable[..., object]:
    """The target's function, loaded once per process (a pool worker's setup step)."""
    function = _LOADED.get(target)
    if function is None:
        function = _LOADED[target] = load_target(target)
    return function


def call_python_grader(
    target: UserTarget, answer_text: str, reference: object, ranged: bool
) -> float:
    """The pool task: one call of the user's function, its value checked as a number."""
    value = target_function(target)(answer_text, reference)
    return reward_value(value, LABEL, ranged=ranged)


LABEL = "python grader"


class UserFunctionGrader(PooledGrader):
    """A user's reward function (python:, verl, trl:) called in worker processes with a
    deadline; `task` is the pool task that calls it, `score_range` maps its value onto
    [0, 1] (the raw value kept)."""

    task: Callable[..., Any]

    def __init__(
        self,
        name: str,
        target: UserTarget,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workers: int = DEFAULT_WORKERS,
        score_range: ScoreRange | None = None,
    ) -> None:
        super().__init__(
            name,
            task=type(self).task,
            timeout_s=timeout_s,
            workers=workers,
            setup=(target_function, (target,)),
        )
        self.target = target
        self.score_range = score_range


class PythonGrader(UserFunctionGrader):
    """Calls a user function per rollout, in worker processes with a deadline."""

    label = LABEL
    task = staticmethod(call_python_grader)

    def payload(
        self, completion: str, reference: object, context: object
    ) -> tuple[Any, ...] | GradeResult:
        prepared = super().payload(completion, reference, None)
        if isinstance(prepared, GradeResult):
            return prepared
        answer_text, _ = prepared
        return (self.target, answer_text, reference, self.score_range is not None)

    def to_result(self, value: object) -> GradeResult:
        return scored(float(value), LABEL, self.score_range)  # type: ignore[arg-type]


def python_grader(spec: str, argument: str | None, options: GraderOptions) -> PythonGrader:
    """The registry's factory for ``python:...``: the function is loaded (and its errors
    reported) here, before any rollout runs."""
    load_user_function(spec)
    check_timeout(spec, options.timeout_s)
    return PythonGrader(
        spec,
        parse_target(spec),
        timeout_s=options.timeout_s,
        workers=options.workers or DEFAULT_WORKERS,
        score_range=options.score_range,
    )
