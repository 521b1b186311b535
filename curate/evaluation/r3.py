"""`--grader r3` in the evaluation flow: a grade that depends on a rollout's siblings.

R3 (curate/graders/r3.py) weights each reference token by the spread of its certainty
across a sample's group, so a rollout is graded with its group. The engine generates a
sample's missing rollouts as one request, so a fresh run grades each group at once, in
the chunk that holds it: `R3Stage.grade` prefills the chunk's new rollouts (the
reference after each one's reasoning; `curate.backends.prefill`), writes their
certainties beside the rollouts (`curate.store.certainty`), then scores each new
rollout with the group made of its sample's stored and new certainties.

On a resume, a stored rollout is never prefilled or scored again: its certainties are
read back and take part in its sample's group, so a rollout re-generated after an error
is graded against the whole group. The stored siblings keep the score they were given
(a store never rewrites a score); in a run finished in one call every rollout of a
group is graded with the same weights. Adaptive rounds and deepening add rollouts to
groups already graded, and are refused with r3 (`curate eval` says so).

Identical reasoning gets one prefill (and the same certainties, so equal scores).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curate.backends.prefill import PrefillBackend, PrefillItem, PrefillResult
from curate.core.prompts import Mode, Prompt
from curate.core.reasoning import THINK_CLOSE, THINK_OPEN
from curate.errors import RunError, UsageError
from curate.graders.base import GradingError
from curate.graders.r3 import ANSWER_BRIDGE, R3Grader, reference_text
from curate.store.certainty import append_certainties, read_certainties

if TYPE_CHECKING:
    from curate.core.rollout import Rollout


def reasoning_context(completion: str | None, reasoning: str | None) -> str:
    """What the reference follows: the reasoning in its tags when the model reasoned,
    else the completion and ANSWER_BRIDGE."""
    if reasoning is not None:
        return f"{THINK_OPEN}{reasoning}{THINK_CLOSE}"
    return f"{completion or ''}{ANSWER_BRIDGE}"


@dataclass
class R3Stage:
    """Grades a chunk's rollouts with R3 (see the module docstring)."""

    run_dir: Any
    backend: PrefillBackend
    grader: R3Grader
    prompts: Mapping[str, Prompt]
    references: Mapping[str, Any]
    mode: Mode
    runs: int | Mapping[str, int]
    error_prefix: str = ""
    # sample id -> rollout_idx -> the reference's log-probabilities (stored and new).
    groups: dict[str, dict[int, tuple[float, ...]]] = field(default_factory=dict)
    prefill_tokens: int = 0
    prefill_seconds: float = 0.0
    prefilled: int = 0  # sequences scored by this stage

    def load(self, scored: Collection[tuple[str, int]]) -> None:
        """Read back the stored certainties of the rollouts in `scored` (the store's
        scored pairs): a certainty row without its rollout (a run killed between the
        two writes) is left out, as that rollout is generated and scored again."""
        frame = read_certainties(self.run_dir)
        keep = set(scored)
        for sid, run, logprobs in zip(
            frame["sample_id"].to_list(),
            frame["rollout_idx"].to_list(),
            frame["logprobs"].to_list(),
            strict=True,
        ):
            if (sid, run) in keep:
                self.groups.setdefault(sid, {})[run] = tuple(logprobs)

    def _target(self, sid: str) -> int:
        return self.runs if isinstance(self.runs, int) else int(self.runs.get(sid, 0))

    def grade(self, records: list[Rollout]) -> None:
        """Score `records` (new rollouts, each with a completion or reasoning): sets
        score and raw_score, or error (a grader error row) when one cannot be scored."""
        items: list[PrefillItem] = []
        wanted: dict[tuple[str, str], int] = {}  # (sample, context) -> item index
        slots: list[tuple[Rollout, int]] = []
        for record in records:
            try:
                target = reference_text(self.references[record.sample_id])
            except GradingError as exc:
                record.error = f"{self.error_prefix}{exc}"
                continue
            context = reasoning_context(record.completion, record.reasoning)
            key = (record.sample_id, context)
            if key not in wanted:
                wanted[key] = len(items)
                items.append(PrefillItem(self.prompts[record.sample_id], context, target))
            slots.append((record, wanted[key]))
        if not items:
            return
        start = time.perf_counter()
        results = self.backend.reference_logprobs(items, self.mode)
        self.prefill_seconds += time.perf_counter() - start
        if len(results) != len(items):
            raise RuntimeError(f"prefill: {len(items)} items sent, {len(results)} results")
        self.prefilled += len(items)
        self.prefill_tokens += sum(r.tokens_in for r in results)
        self._keep(slots, results)
        touched = {record.sample_id for record, i in slots if results[i].error is None}
        scores = {sid: self._group_scores(sid) for sid in touched}
        for record, i in slots:
            result = results[i]
            if result.error is not None:
                record.error = f"{self.error_prefix}{result.error}"
                continue
            score = scores[record.sample_id][record.rollout_idx]
            record.score, record.raw_score = score.score, score.raw

    def _keep(self, slots: list[tuple[Rollout, int]], results: list[PrefillResult]) -> None:
        """Record the new certainties, in memory and beside the rollouts."""
        import polars as pl

        rows: dict[str, list[Any]] = {name: [] for name in ("sample_id", "rollout_idx")}
        rows.update(tokens=[], logprobs=[], tokens_in=[])
        for record, i in slots:
            result = results[i]
            if result.error is not None:
                continue
            self.groups.setdefault(record.sample_id, {})[record.rollout_idx] = result.logprobs
            rows["sample_id"].append(record.sample_id)
            rows["rollout_idx"].append(record.rollout_idx)
            rows["tokens"].append(list(result.tokens))
            rows["logprobs"].append(list(result.logprobs))
            rows["tokens_in"].append(result.tokens_in)
        append_certainties(self.run_dir, pl.DataFrame(rows))

    def _group_scores(self, sid: str) -> dict[int, Any]:
        target = self._target(sid)
        members = sorted(r for r in self.groups.get(sid, {}) if r < target)
        group = [self.groups[sid][r] for r in members]
        try:
            return dict(zip(members, self.grader.scores(group), strict=True))
        except ValueError as exc:
            # Stored certainties from another tokenizer (a resume on another model).
            raise RunError(
                f"r3: sample {sid!r}: {exc}; the stored certainties in certainty/ come from "
                "another model or tokenizer: resume with the same model, or --force-new"
            ) from exc


def r3_stage(
    run_dir: Any,
    backend: object,
    grader: R3Grader,
    prompts: Mapping[str, Prompt],
    references: Mapping[str, Any],
    mode: Mode,
    runs: int | Mapping[str, int],
    scored: Collection[tuple[str, int]],
    error_prefix: str,
) -> R3Stage:
    """The stage for one `run_eval` call; UsageError for a backend without prefill."""
    if not isinstance(backend, PrefillBackend):
        raise UsageError(
            f"--grader r3 reads prompt log-probabilities, which the {type(backend).__name__} "
            "backend cannot give: use --backend vllm, or --backend openai against vllm serve"
        )
    stage = R3Stage(
        run_dir, backend, grader, prompts, references, mode, runs, error_prefix=error_prefix
    )
    stage.load(scored)
    return stage


def prefill_line(prefills: int, tokens: int, seconds: float) -> str:
    """The eval summary's line for r3's prefills (their time is inside the run's)."""
    return f"r3: {prefills:,} prefills of {tokens:,} tokens in {seconds:.1f}s (in the time above)"
