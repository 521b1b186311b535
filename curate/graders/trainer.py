"""The trainer's own reward as a grader: score rollouts exactly as verl or TRL will.

* ``verl:FILE.py:FUNCTION`` / ``verl:module:function``: verl's custom reward signature,
  called with keywords as verl's reward manager does::

      compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)

  returning a number (or bool) or a dict with a ``score`` (a ``pred`` in it becomes
  `extracted`). Per sample, from its context (the data set's row): ``data_source``
  (default ""), ``ground_truth`` from ``reward_model.ground_truth`` (default: the
  sample's reference), and ``extra_info`` (default None).
* ``verl`` alone: verl's own routing by data source,
  ``verl.utils.reward_score.default_compute_score`` (needs verl installed).
* ``trl:FILE.py:FUNCTION`` / ``trl:module:function``: a TRL reward function, called as
  ``f(prompts=[...], completions=[...], **columns)`` in batches of `batch_size`, with
  every other column of the data set as a keyword (a list, one value per completion).
  When a sample's prompt is a list of chat messages (TRL's "conversational" format),
  completions are passed as ``[{"role": "assistant", "content": text}]``, as TRL does;
  otherwise as plain strings. A ``None`` reward means "not applicable to this sample":
  that rollout is an error row with that reason, never a 0.

Both see the completion exactly as the trainer would (no ``<think>`` stripping): the
point is to measure the reward the trainer will optimise. They run in worker processes
(`curate.graders.pool`) with a deadline per call; for TRL a call is a batch, so a hang
or crash is an error row for every rollout of that batch. A reward outside [0, 1] needs
``score_range=(lo, hi)``: it is mapped to [0, 1] and the raw value kept.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from curate.errors import MissingExtraError
from curate.graders.base import (
    DEFAULT_TIMEOUT_S,
    GradeResult,
    GraderOptions,
    GradingError,
    SampleContext,
    ScoreRange,
    check_lengths,
    error_result,
    reward_value,
    scored,
)
from curate.graders.custom import (
    UserFunctionGrader,
    UserTarget,
    check_signature,
    load_target,
    parse_target,
    target_function,
)
from curate.graders.pool import DEFAULT_WORKERS, check_timeout

VERL_FORMS = "verl, verl:FILE.py:FUNCTION or verl:module:function"
TRL_FORMS = "trl:FILE.py:FUNCTION or trl:module:function"
VERL_LABEL = "verl reward"
TRL_LABEL = "trl reward"
VERL_DEFAULT = ("verl.utils.reward_score", "default_compute_score")
VERL_INSTALL_HINT = (
    "pip install verl (its default reward routing), or name your function: verl:FILE.py:FUNCTION"
)
# Columns that are the reward function's own arguments, never passed as extra columns.
_TRL_RESERVED = frozenset({"prompt", "prompts", "completion", "completions"})
DEFAULT_TRL_BATCH = 16


# -- verl -------------------------------------------------------------------------------


def verl_ground_truth(reference: object, context: SampleContext | None) -> object:
    """verl keeps the answer at ``reward_model.ground_truth``; else the reference."""
    reward_model = (context or {}).get("reward_model")
    if isinstance(reward_model, Mapping) and reward_model.get("ground_truth") is not None:
        return reward_model["ground_truth"]
    return reference


def call_verl(
    target: UserTarget,
    solution_str: str,
    data_source: object,
    ground_truth: object,
    extra_info: object,
    ranged: bool,
) -> tuple[float, str | None]:
    """The pool task: one compute_score call, its value checked as a number."""
    value = target_function(target)(
        data_source=data_source,
        solution_str=solution_str,
        ground_truth=ground_truth,
        extra_info=extra_info,
    )
    extracted: str | None = None
    if isinstance(value, Mapping):
        if "score" not in value:
            raise GradingError(
                f"{VERL_LABEL} returned a dict without 'score' (keys: {sorted(value)[:5]})"
            )
        if value.get("pred") is not None:
            extracted = str(value["pred"])
        value = value["score"]
    return reward_value(value, VERL_LABEL, ranged=ranged), extracted


class VerlGrader(UserFunctionGrader):
    """A verl ``compute_score`` per rollout, in worker processes with a deadline."""

    label = VERL_LABEL
    needs_context = True
    sees_reasoning = True  # the decoded response, as the trainer passes it

    task = staticmethod(call_verl)

    def payload(
        self, completion: str, reference: object, context: SampleContext | None
    ) -> tuple[Any, ...] | GradeResult:
        row = context or {}
        return (
            self.target,
            completion,
            row.get("data_source") or "",
            verl_ground_truth(reference, context),
            row.get("extra_info"),
            self.score_range is not None,
        )

    def expected_answer(self, reference: object, context: SampleContext | None) -> object:
        """The answer a correct completion holds (for the reference check)."""
        return verl_ground_truth(reference, context)

    def to_result(self, value: object) -> GradeResult:
        raw, extracted = cast(tuple[float, str | None], value)
        return scored(raw, VERL_LABEL, self.score_range, extracted)


def verl_grader(spec: str, argument: str | None, options: GraderOptions) -> VerlGrader:
    """The registry's factory for ``verl`` and ``verl:...``."""
    check_timeout(spec, options.timeout_s)
    if argument is None:
        if importlib.util.find_spec("verl") is None:
            raise MissingExtraError(f"grader {spec!r} needs verl; {VERL_INSTALL_HINT}")
        # Loaded only in the workers: importing verl pulls in torch, which the parent
        # process has no other use for.
        module, function = VERL_DEFAULT
        target = UserTarget(spec, module, module, False, function)
    else:
        target = parse_target(spec, VERL_FORMS)
        check_signature(
            spec,
            load_target(target),
            data_source="data_source",
            solution_str="solution_str",
            ground_truth="ground_truth",
            extra_info=None,
        )
    return VerlGrader(
        spec,
        target,
        timeout_s=options.timeout_s,
        workers=options.workers or DEFAULT_WORKERS,
        score_range=options.score_range,
    )


# -- TRL --------------------------------------------------------------------------------


def is_conversational(prompt: object) -> bool:
    """A prompt in TRL's conversational format: a list of {"role", "content"} messages."""
    return (
        isinstance(prompt, Sequence)
        and not isinstance(prompt, str)
        and len(prompt) > 0
        and all(isinstance(message, Mapping) and "role" in message for message in prompt)
    )


def trl_arguments(
    completions: Sequence[str], contexts: Sequence[SampleContext | None]
) -> tuple[list[object], list[object], dict[str, list[object]]]:
    """(prompts, completions, columns) as TRL's GRPOTrainer would pass them."""
    prompts = [(context or {}).get("prompt") for context in contexts]
    shaped: list[object] = [
        [{"role": "assistant", "content": text}] if is_conversational(prompt) else text
        for text, prompt in zip(completions, prompts, strict=True)
    ]
    names: dict[str, None] = {}
    for context in contexts:
        names.update(dict.fromkeys(key for key in context or {} if key not in _TRL_RESERVED))
    columns = {name: [(context or {}).get(name) for context in contexts] for name in names}
    return prompts, shaped, columns


# Per item: (raw reward, None) or (None, why it has none).
_TrlItem = tuple[float | None, str | None]


def call_trl(
    target: UserTarget,
    prompts: list[object],
    completions: list[object],
    columns: dict[str, list[object]],
    ranged: bool,
) -> list[_TrlItem]:
    """The pool task: one call of the reward function on a batch."""
    rewards = target_function(target)(prompts=prompts, completions=completions, **columns)
    try:
        if isinstance(rewards, str | bytes | Mapping):
            raise TypeError
        values = list(cast(Iterable[object], rewards))
    except TypeError:
        raise GradingError(
            f"{TRL_LABEL} returned {type(rewards).__name__}; expected a list"
        ) from None
    if len(values) != len(completions):
        raise GradingError(
            f"{TRL_LABEL} returned {len(values)} rewards for {len(completions)} completions"
        )
    items: list[_TrlItem] = []
    for value in values:
        if value is None:
            items.append((None, f"{TRL_LABEL} returned None (not applicable to this sample)"))
            continue
        try:
            items.append((reward_value(value, TRL_LABEL, ranged=ranged), None))
        except GradingError as exc:
            items.append((None, str(exc)))
    return items


class TrlGrader(UserFunctionGrader):
    """A TRL reward function on batches of rollouts, in worker processes with a deadline."""

    label = TRL_LABEL
    needs_context = True
    sees_reasoning = True  # the decoded response, as the trainer passes it

    task = staticmethod(call_trl)

    def __init__(
        self,
        name: str,
        target: UserTarget,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        workers: int = DEFAULT_WORKERS,
        score_range: ScoreRange | None = None,
        batch_size: int = DEFAULT_TRL_BATCH,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        super().__init__(
            name, target, timeout_s=timeout_s, workers=workers, score_range=score_range
        )
        self.batch_size = batch_size

    def grade_batch(
        self,
        completions: Sequence[str],
        references: Sequence[object],
        contexts: Sequence[SampleContext] | None = None,
    ) -> list[GradeResult]:
        check_lengths(completions, references)
        rows: Sequence[SampleContext | None] = (
            contexts if contexts is not None else [None] * len(completions)
        )
        check_lengths(completions, rows)
        starts = range(0, len(completions), self.batch_size)
        payloads: dict[int, tuple[Any, ...]] = {}
        for start in starts:
            stop = start + self.batch_size
            prompts, shaped, columns = trl_arguments(completions[start:stop], rows[start:stop])
            payloads[start] = (
                self.target,
                prompts,
                shaped,
                columns,
                self.score_range is not None,
            )
        done = self.run_calls(payloads, self._items, str)
        results: list[GradeResult] = []
        for start in starts:
            size = len(completions[start : start + self.batch_size])
            outcome = done.get(start, f"{TRL_LABEL} lost this batch")
            if isinstance(outcome, str):  # the call failed: every rollout in it did
                results.extend([error_result(outcome)] * size)
            else:
                results.extend(outcome)
        return results

    def _items(self, value: object) -> list[GradeResult] | str:
        results: list[GradeResult] = []
        for raw, error in value:  # type: ignore[attr-defined]
            if error is not None:
                results.append(error_result(error))
                continue
            try:
                results.append(scored(raw, TRL_LABEL, self.score_range))
            except GradingError as exc:
                results.append(error_result(str(exc)))
        return results


def trl_grader(spec: str, argument: str | None, options: GraderOptions) -> TrlGrader:
    """The registry's factory for ``trl:...``."""
    check_timeout(spec, options.timeout_s)
    target = parse_target(spec, TRL_FORMS)
    # Partial: the data set's columns (solution, answer...) are only known per sample.
    check_signature(spec, load_target(target), partial=True, prompts=[], completions=[])
    return TrlGrader(
        spec,
        target,
        timeout_s=options.timeout_s,
        workers=options.workers or DEFAULT_WORKERS,
        score_range=options.score_range,
    )
