"""Grader specs: the one place that maps a spec string to a grader.

Specs (the part before the first ``:`` is case-insensitive; the rest is kept verbatim):

* ``exact``
* ``numeric``, ``numeric:rel_tol=1e-4``, ``numeric:abs_tol=0.01``,
  ``numeric:rel_tol=0,abs_tol=0.5`` (defaults rel_tol=1e-4, abs_tol=0)
* ``math`` (needs the ``math`` extra)
* ``regex:PATTERN`` (everything after the first ``:``, so the pattern may contain ``:``)
* ``python:FILE.py:FUNCTION`` / ``python:module:function``
* ``choice`` (multiple-choice letters)
* ``verl`` / ``verl:FILE.py:FUNCTION`` / ``verl:module:function`` (verl's reward
  signature; bare ``verl`` is verl's own default reward routing)
* ``trl:FILE.py:FUNCTION`` / ``trl:module:function`` (TRL's reward-function signature)
* ``code``, ``code:score=fraction,memory_mb=2048,nproc=64,fsize_mb=16,disk_mb=64,python=P``
  and ``packages=NAME,NAME`` or ``packages=site`` (the third-party packages the program
  may import; by default none) (run the completion's program against the sample's tests
  in a sandbox; `curate.graders.code`)
* ``r3``, ``r3:tau=X`` (DRO's reasoning reflection reward: the policy model's certainty
  of the reference after each rollout's reasoning, graded per group; `curate.graders.r3`)
* ``reward-model`` (a sequence-classification reward model behind an HTTP server; its
  URL comes with ``reward_model=RewardModelConfig(...)``)
* ``judge`` (an LLM judge; its model and endpoint come with ``judge=JudgeConfig(...)``)

Surrounding whitespace is dropped from the whole spec (write ``\\s`` or ``[ ]`` for a
pattern that must end in a space). A bad spec raises `UsageError` naming it.
``Grader.name`` is the spec as given (without surrounding whitespace), for the run
manifest.

Each kind is an entry of a `curate.core.registry.Registry`: a factory
``(spec, argument, options) -> Grader``, imported only when that kind is chosen;
`argument` is the text after the first ``:`` (None when there is no ``:``).

A kind may declare its own options as a schema (`curate.core.options.OptionSchema`:
typed, defaulted, validated and documented once): the built-in ones in
`GRADER_OPTIONS`, a plugin's as its factory's `options` attribute. `options_schema`
finds it, `grader_options` builds it from `-O KIND.NAME=VALUE` pairs over the values of
the kind's dedicated flags, and the factory receives it as `GraderOptions.kind_options`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from curate.core.options import OptionSchema
from curate.core.registry import Registry, did_you_mean
from curate.errors import CurateError, UsageError
from curate.graders.base import DEFAULT_TIMEOUT_S, Grader, GraderOptions, ScoreRange
from curate.graders.numeric import reference_number

if TYPE_CHECKING:
    from curate.graders.judge import JudgeConfig
    from curate.graders.reward_model import RewardModelConfig

GraderFactory = Callable[[str, str | None, GraderOptions], Grader]

GRADER_NAMES: tuple[str, ...] = (
    "exact",
    "numeric",
    "math",
    "regex:PATTERN",
    "python:FILE.py:FUNCTION",
    "python:module:function",
    "choice",
    "verl",
    "verl:FILE.py:FUNCTION",
    "trl:FILE.py:FUNCTION",
    "trl:module:function",
    "judge",
    "code",
    "code:score=fraction",
    "reward-model",
    "r3",
    "r3:tau=X",
)

# Other packages add grader kinds through the ``curate.graders`` entry-point group: the
# entry point names a factory of the same signature as the built-in ones.
GRADERS: Registry[GraderFactory] = Registry(
    "grader", normalise=lambda name: name.strip().lower(), group="curate.graders"
)
GRADERS.add(
    "exact",
    "curate.graders.simple:exact_grader",
    help="normalised string equality on the final answer",
)
GRADERS.add(
    "numeric",
    "curate.graders.simple:numeric_grader",
    help="the final number, with a tolerance (numeric:rel_tol=X,abs_tol=Y)",
)
GRADERS.add(
    "math",
    "curate.graders.mathverify:math_grader",
    help="symbolic equivalence with math_verify, in worker processes",
    install_hint="pip install 'curate[math]'",
)
GRADERS.add(
    "regex",
    "curate.graders.simple:regex_grader",
    help="the last match of a pattern (group 1 if any), compared like exact",
)
GRADERS.add(
    "python",
    "curate.graders.custom:python_grader",
    help="your function fn(completion, reference) -> float or bool",
)
GRADERS.add(
    "choice",
    "curate.graders.choice:choice_grader",
    help="multiple choice: the letter the completion chose against the reference letter",
)
GRADERS.add(
    "verl",
    "curate.graders.trainer:verl_grader",
    help="verl's compute_score(data_source, solution_str, ground_truth, extra_info)",
)
GRADERS.add(
    "trl",
    "curate.graders.trainer:trl_grader",
    help="a TRL reward function f(prompts, completions, **columns) -> list[float | None]",
)

GRADERS.add(
    "judge",
    "curate.graders.judge:judge_grader",
    help="an LLM judge with a rubric, at any OpenAI-compatible endpoint (--judge-model)",
    install_hint="pip install 'curate[openai]'",
)

GRADERS.add(
    "code",
    "curate.graders.code:code_grader",
    help="run the program in the completion against the sample's tests, sandboxed",
)


GRADERS.add(
    "reward-model",
    "curate.graders.reward_model:reward_model_grader",
    help="a reward model served by vLLM (/classify, /pooling or /score): --reward-base-url",
    install_hint="pip install 'curate[openai]'",
)

GRADERS.add(
    "r3",
    "curate.graders.r3:r3_grader",
    help="no verifier: the model's certainty of the reference after each rollout's reasoning",
)

# The built-in kinds' own option schemas (a plugin's rides on its factory).
GRADER_OPTIONS: Registry[type[OptionSchema]] = Registry(
    "grader", normalise=lambda name: name.strip().lower()
)
GRADER_OPTIONS.add(
    "judge",
    "curate.graders.judge:JudgeConfig",
    help="the LLM judge's model, endpoint, rubric and limits",
    install_hint="pip install 'curate[openai]'",
)
GRADER_OPTIONS.add(
    "reward-model",
    "curate.graders.reward_model:RewardModelConfig",
    help="the reward model's server, model name, endpoint and limits",
    install_hint="pip install 'curate[openai]'",
)

# The kinds that call a reward function whose scale the user may declare.
RANGED_KINDS = frozenset({"python", "verl", "trl", "reward-model"})
# The kinds that read the data as stored (no answer extraction): reward functions, and
# the code grader, whose "reference" is the sample's tests, and r3, which scores the
# reference text as the data holds it.
AS_STORED_KINDS = RANGED_KINDS | {"code", "r3"}


def grader_kind(spec: str | None) -> str:
    """The kind a spec names (``"code"`` for ``code:score=fraction``); "" for None."""
    return (spec or "").partition(":")[0].strip().lower()


def _unknown(spec: str) -> UsageError:
    names = [*GRADER_NAMES, *(entry.name for entry in GRADERS.plugins())]
    close = did_you_mean(spec.partition(":")[0], GRADERS.names())  # plugins included
    hint = f" (did you mean '{close}'?)" if close else ""
    return UsageError(f"unknown grader {spec!r}{hint}; expected one of: {', '.join(names)}")


def options_schema(kind: str) -> type[OptionSchema] | None:
    """The option schema grader kind `kind` declares (None: it takes no options of its
    own); UsageError for an unknown kind."""
    kind = grader_kind(kind)
    if kind in GRADER_OPTIONS:
        return GRADER_OPTIONS.get(kind)
    if kind not in GRADERS:
        raise _unknown(kind)
    schema = getattr(GRADERS.get(kind), "options", None)
    if isinstance(schema, type) and issubclass(schema, OptionSchema):
        return schema
    if schema is not None:
        raise UsageError(f"grader '{kind}': its factory's `options` is not an OptionSchema")
    return None


def grader_options(
    kind: str, pairs: Sequence[str], base: OptionSchema | None = None
) -> OptionSchema:
    """The options of grader kind `kind` from `-O KIND.NAME=VALUE` pairs (`pairs`, each
    with its `KIND.` prefix), laid over `base` (built from the kind's dedicated flags,
    or None), validated by the kind's schema. A name set both ways is refused."""
    kind = grader_kind(kind)
    schema = options_schema(kind)
    if schema is None:
        first = pairs[0].partition("=")[0].strip() if pairs else kind
        raise UsageError(f"--option {first}: --grader {kind} takes no options of its own")
    values = schema.assignments(pairs, owner=f"--grader {kind}", qualifier=f"{kind}.")
    if base is None:
        return schema.parse(values)
    if not isinstance(base, schema):
        raise UsageError(f"{type(base).__name__} are not options of --grader {kind}")
    for name in values:
        if name in base.given:
            raise UsageError(
                f"{schema.flag(name)} and --option {kind}.{name} both set it: give one"
            )
    return schema.parse({**{n: getattr(base, n) for n in base.given}, **values})


def get_grader(
    spec: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    score_range: tuple[float, float] | None = None,
    workers: int | None = None,
    reward_model: RewardModelConfig | None = None,
    judge: JudgeConfig | None = None,
    kind_options: OptionSchema | None = None,
) -> Grader:
    """Build the grader a spec names.

    `timeout_s` is the per-call deadline of the graders that run in worker processes
    (math, python, verl, trl); `score_range=(lo, hi)` declares the scale of a continuous
    reward (python, verl, trl), mapped to [0, 1] with the raw value kept; `workers` sets
    those graders' worker processes; `kind_options` are the kind's own options (an
    instance of its `options_schema`: given for another kind, they are refused);
    `reward_model` (a `RewardModelConfig`) and `judge` (a `JudgeConfig`) are the same for
    `reward-model` and `judge`. Call `close()` on the grader when done.
    """
    spec = spec.strip()
    if not spec:
        raise UsageError(f"empty grader spec; expected one of: {', '.join(GRADER_NAMES)}")
    kind, sep, argument = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in GRADERS:
        raise _unknown(spec)
    if score_range is not None and kind not in RANGED_KINDS:
        raise UsageError(
            f"grader {spec!r} scores in [0, 1]; a score range applies to "
            "python:, verl, trl: and reward-model graders"
        )
    if reward_model is not None and kind != "reward-model":
        raise UsageError(f"grader {spec!r}: the --reward-* options need --grader reward-model")
    if judge is not None and kind != "judge":
        raise UsageError(
            f"the judge options (--judge-model, ...) apply to --grader judge, not {spec!r}"
        )
    own = [o for o in (kind_options, reward_model, judge) if o is not None]
    if len(own) > 1:
        raise UsageError(f"grader {spec!r}: its own options are given twice")
    if own:
        schema = options_schema(kind)
        if schema is None or not isinstance(own[0], schema):
            raise UsageError(
                f"grader {spec!r}: {type(own[0]).__name__} are not its options"
                + ("" if schema is None else f" ({schema.__name__} are)")
            )
    if workers is not None and workers < 1:
        raise UsageError(f"grader {spec!r}: workers must be at least 1, got {workers}")
    try:
        ranged = ScoreRange(*score_range) if score_range is not None else None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"grader {spec!r}: {exc}") from None
    options = GraderOptions(
        timeout_s=timeout_s,
        score_range=ranged,
        workers=workers,
        kind_options=own[0] if own else None,
    )
    factory = GRADERS.get(kind)
    plugin = GRADERS.entry(kind).plugin
    if plugin is None:
        return factory(spec, argument if sep else None, options)
    try:
        return factory(spec, argument if sep else None, options)
    except CurateError:
        raise
    except Exception as exc:
        # Another package's factory refusing the spec: one line naming it, as ours do.
        raise UsageError(
            f"grader {spec!r} (from the {plugin} package): {type(exc).__name__}: {exc}"
        ) from exc


def default_grader_spec(references: Sequence[object]) -> str:
    """``"numeric"`` when every reference is a number (or a string that is exactly one
    number, e.g. "1,234", "12%", "$5", "(45)", "3/4"), else ``"exact"``. No references
    means ``"exact"``.

    Kept for callers of the first version; `curate.graders.references.choose_grader`
    looks at extracted references, knows `math` and `choice`, and says why."""
    if len(references) == 0:
        return "exact"
    if all(reference_number(reference, strict=True) is not None for reference in references):
        return "numeric"
    return "exact"
