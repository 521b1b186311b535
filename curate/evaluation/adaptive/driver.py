"""Adaptive evaluation against a backend: the policy's round loop
(`curate.evaluation.adaptive.policy.run_rounds`) with an outcome source backed by the
run directory and `run_eval`.

Each round the source rebuilds every sample's state from the stored rollouts (so a
killed adaptive run resumes like a normal one: the run directory is the only state)
and draws the planned rollouts as one `run_eval` call with per-sample run targets.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from curate.core.outcome import OUTCOMES, PASS_SCORE, outcome_of
from curate.evaluation.adaptive.policy import AdaptivePolicy, Observation, SampleState, run_rounds
from curate.evaluation.progress import NullProgress, OutcomeTally, Progress
from curate.evaluation.runner import EvalResult, run_eval, stored_outcomes
from curate.evaluation.spec import Evaluation, evaluation_of

if TYPE_CHECKING:
    import polars as pl

    from curate.store.run_dir import RolloutStore


@dataclass
class AdaptiveResult(EvalResult):
    """An eval result plus what the adaptive loop did."""

    rounds: int = 0
    spent: int = 0  # rollouts the run holds at the end (scored or failed)
    mixed: int = 0  # samples whose outcomes are mixed
    settled: int = 0  # samples that left the pool (mixed, or balanced)
    capped: int = 0  # samples still all the same at the cap
    samples: int = 0
    stop_reason: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """For the manifest and the CLI line."""
        return {
            "rounds": self.rounds,
            "rollouts": self.spent,
            "samples": self.samples,
            "mixed": self.mixed,
            "settled": self.settled,
            "capped": self.capped,
            "stop_reason": self.stop_reason,
        }


@dataclass
class StoredState:
    """The adaptive state rebuilt from a run directory."""

    states: dict[str, SampleState]
    targets: dict[str, int]  # run count that covers the stored runs (no holes beyond)
    holes: dict[str, list[int]]  # missing run indices below the highest scored one
    spent: int


def state_from_store(stored: pl.DataFrame | None, sample_ids: Sequence[str]) -> StoredState:
    """Per-sample outcome counts from de-duplicated rollouts (sample_id, rollout_idx, score,
    error)."""
    import polars as pl

    states = {sid: SampleState() for sid in sample_ids}
    targets = dict.fromkeys(sample_ids, 0)
    holes: dict[str, list[int]] = {}
    if stored is None or stored.height == 0:
        return StoredState(states, targets, holes, 0)
    mine = stored.filter(pl.col("sample_id").is_in(list(sample_ids)))
    scored = mine.filter(pl.col("error").is_null() & pl.col("score").is_not_null())
    agg = scored.group_by("sample_id").agg(
        pl.len().alias("n"),
        (pl.col("score") >= PASS_SCORE).sum().alias("c"),
        pl.col("score").min().alias("lo"),
        pl.col("score").max().alias("hi"),
        pl.col("rollout_idx").max().alias("last"),
    )
    gappy = []
    for sid, n, c, lo, hi, last in agg.iter_rows():
        states[sid] = SampleState(int(n), int(c), float(lo), float(hi))
        targets[sid] = int(last) + 1
        if int(last) + 1 != int(n):
            gappy.append(sid)
    if gappy:  # rare: failed rollouts in the middle of a sample's runs
        for sid, idx in (
            scored.filter(pl.col("sample_id").is_in(gappy))
            .group_by("sample_id")
            .agg(pl.col("rollout_idx"))
            .iter_rows()
        ):
            have = set(idx)
            holes[sid] = [r for r in range(targets[sid]) if r not in have]
    return StoredState(states, targets, holes, mine.height)


def target_count(state: StoredState, sample_id: str, extra: int) -> int:
    """The run count whose missing run indices are exactly `extra` new ones (holes first)."""
    holes = state.holes.get(sample_id, [])
    if extra <= len(holes):
        return holes[extra - 1] + 1
    return state.targets[sample_id] + extra - len(holes)


class _CombinedTally(OutcomeTally):
    """The live tally line over every sample: the samples outside this round are fixed."""

    def __init__(self, base: tuple[int, int, int], live: OutcomeTally) -> None:
        super().__init__(scored=live.scored, passed=live.passed, credited=live.credited)
        self.base = base

    def counts(self) -> tuple[int, int, int]:
        right, wrong, mixed = super().counts()
        return right + self.base[0], wrong + self.base[1], mixed + self.base[2]


class _RoundsProgress:
    """One progress display across all rounds (run_eval starts and finishes one per round)."""

    def __init__(self, inner: Progress, total: int) -> None:
        self.inner = inner
        self.total = total
        self.started = False
        self.stored = 0  # rollouts already in the run when the loop began
        self.base: tuple[int, int, int] = (0, 0, 0)

    def start(self, total: int, done: int, tally: OutcomeTally) -> None:
        if not self.started:
            self.started = True
            self.inner.start(self.total, self.stored, _CombinedTally(self.base, tally))

    def advance(self, rollouts: int, errors: int, tally: OutcomeTally) -> None:
        self.inner.advance(rollouts, errors, _CombinedTally(self.base, tally))

    def finish(self) -> None:
        pass  # the loop finishes the display once, at the end


def _label_counts(states: Iterable[SampleState]) -> tuple[int, int, int]:
    """(always correct, always incorrect, mixed) among samples with a scored rollout."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for st in states:
        outcome = outcome_of(st.n, st.successes, st.highest)
        if outcome is not None:
            counts[outcome] += 1
    return counts["always_correct"], counts["always_incorrect"], counts["mixed"]


class _StoreSource:
    """The policy's OutcomeSource for a real run: observe = read the run directory,
    draw = one `run_eval` round. A sample whose round brought no scored rollout (every
    attempt failed) is exhausted for the rest of this invocation; a re-run retries it."""

    def __init__(self, store: RolloutStore, evaluation: Evaluation, shown: _RoundsProgress) -> None:
        self.store = store
        self.evaluation = evaluation
        self.ids = list(evaluation.prompts)
        self.shown = shown
        self.result = AdaptiveResult(samples=len(self.ids))
        self.stalled: set[str] = set()
        self.now = StoredState({}, {}, {}, 0)
        self._stored: pl.DataFrame | None = None
        self._observed = False
        # Scored rollouts per sample before the last round, when that round had errors.
        self._check: dict[str, int] = {}

    def observe(self) -> Observation:
        self._stored = stored_outcomes(self.store)
        now = self.now = state_from_store(self._stored, self.ids)
        self.stalled.update(sid for sid, n in self._check.items() if now.states[sid].n <= n)
        if not self._observed:
            self._observed = True
            self.result.skipped = self.shown.stored = now.spent
        self.result.spent = now.spent
        return Observation(now.states, now.spent, self.stalled)

    def draw(self, plan: Mapping[str, int]) -> None:
        now = self.now
        targets = {sid: target_count(now, sid, k) for sid, k in plan.items()}
        self.shown.base = _label_counts(st for sid, st in now.states.items() if sid not in plan)
        before = {sid: now.states[sid].n for sid in plan}
        res = run_eval(
            self.store,
            self.evaluation.with_runs(targets),
            progress=self.shown,
            stored=self._stored,
        )
        r = self.result
        r.rounds += 1
        r.rollouts += res.rollouts
        r.errors += res.errors
        r.error_messages.update(res.error_messages)
        r.truncated += res.truncated
        r.prompt_tokens += res.prompt_tokens
        r.completion_tokens += res.completion_tokens
        r.shards += res.shards
        self._check = before if res.errors else {}


def run_adaptive(
    store: RolloutStore,
    evaluation: Evaluation | None = None,
    policy: AdaptivePolicy | None = None,
    *,
    progress: Progress | None = None,
    **fields: Any,
) -> AdaptiveResult:
    """Draw rounds through `run_eval` until the policy has nothing left to ask.

    `fields` are the Evaluation's own, for callers that spell them out; its `runs` is
    not used (the policy sets each round's per-sample targets). Every round starts
    from the run directory, so a resumed run rebuilds its state from the stored
    rollouts.
    """
    if policy is None:
        raise TypeError("run_adaptive needs an AdaptivePolicy")
    ev = evaluation_of(evaluation, fields)
    samples = len(ev.prompts)
    cap_total = policy.budget if policy.budget is not None else samples * (policy.max_runs or 0)
    shown = _RoundsProgress(progress or NullProgress(), cap_total)
    source = _StoreSource(store, ev, shown)
    result = source.result
    result.params = policy.params()
    start = time.perf_counter()
    try:
        _, last = run_rounds(policy, source)
        result.stop_reason = _stop_reason(policy, source.now, source.stalled)
        _final_counts(result, policy, last.states.values())
    finally:
        if shown.started:
            shown.inner.finish()
        result.seconds = time.perf_counter() - start
    return result


def _stop_reason(policy: AdaptivePolicy, now: StoredState, stalled: set[str]) -> str:
    if stalled:
        return f"{len(stalled)} sample(s) got no scored rollout in a round; re-run to retry"
    if policy.budget is not None and now.spent >= policy.budget:
        return "budget spent"
    if policy.budget is not None and any(policy.wanted(st) for st in now.states.values()):
        return "the rest of the budget cannot open another sample"
    return "every sample is mixed or at the cap"


def _final_counts(
    result: AdaptiveResult, policy: AdaptivePolicy, states: Iterable[SampleState]
) -> None:
    for st in states:
        result.mixed += st.mixed
        result.settled += policy.settled(st)
        room = policy.room(st)
        result.capped += (not st.mixed) and room == 0
