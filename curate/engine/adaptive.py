"""Adaptive evaluation: draw rollouts in rounds and stop a sample as soon as it has
learning signal (seed 002's gate: a group is useful only when its outcomes differ).

The policy is a pure object: given each sample's outcomes so far, it says how many
more rollouts each sample draws this round. `run_policy` drives it against any
source of outcomes (a replay of stored outcomes, a simulation); `run_adaptive`
drives it against a backend through `run_eval`, round by round, with the run
directory as the only state, so a killed adaptive run resumes like a normal one.

Rules (Reinforce-Ada-Seq style):
- a sample leaves the pool once its outcomes are mixed (two scores differ), or with
  `balanced=K` once it has K passes (score >= 1) and K non-passes;
- a sample whose outcomes are still all the same keeps drawing until `max_runs`;
- with `budget`, when the remaining budget cannot pay for every wanted draw, it goes
  to the samples with the best chance of opening per rollout, on the Beta-smoothed
  pass rate, and the run stops when the budget is spent.

With `max_runs = N` and no budget, every sample ends with the same always-correct /
always-wrong / mixed label as a fixed-N run on the same outcome sequence: the
adaptive run sees a prefix of it, stops early only once the prefix is mixed (so the
whole sequence is mixed), and otherwise sees all N outcomes.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from curate.core.outcome import PASS_SCORE, outcome_of_scores
from curate.engine.progress import NullProgress, OutcomeTally, Progress
from curate.engine.runner import DEFAULT_CHUNK_SIZE, EvalResult, run_eval, stored_outcomes
from curate.errors import UsageError
from curate.stats.estimators import BetaPrior, fit_beta_prior

if TYPE_CHECKING:
    import polars as pl

    from curate.backends.base import Backend, Mode, Prompt, SamplingConfig
    from curate.graders import Grader
    from curate.store.run_dir import RolloutStore

# One draw per round: a sample stops at the very draw that mixes it (Reinforce-Ada-Seq);
# an untouched sample still draws two, the fewest that can be mixed.
DEFAULT_ROUND_SIZE = 1


@dataclass(frozen=True, slots=True)
class SampleState:
    """One sample's scored outcomes so far, as counts (order does not matter to the rules)."""

    n: int = 0
    successes: int = 0
    lowest: float | None = None
    highest: float | None = None

    @property
    def failures(self) -> int:
        """Rollouts below full credit."""
        return self.n - self.successes

    @property
    def mixed(self) -> bool:
        """At least two outcomes differ: the gate is open."""
        return self.n >= 2 and self.lowest != self.highest

    def add(self, score: float) -> SampleState:
        return SampleState(
            n=self.n + 1,
            successes=self.successes + (score >= PASS_SCORE),
            lowest=score if self.lowest is None else min(self.lowest, score),
            highest=score if self.highest is None else max(self.highest, score),
        )

    @classmethod
    def of(cls, scores: Iterable[float]) -> SampleState:
        state = cls()
        for score in scores:
            state = state.add(score)
        return state


def binomial_range_probability(draws: int, p: float, need_pass: int, need_fail: int) -> float:
    """P(at least need_pass passes and at least need_fail non-passes in `draws` Bernoulli(p))."""
    lo, hi = need_pass, draws - need_fail
    if lo > hi:
        return 0.0
    if lo <= 0 and hi >= draws:
        return 1.0
    total = 0.0
    for x in range(lo, hi + 1):
        total += math.comb(draws, x) * p**x * (1.0 - p) ** (draws - x)
    return min(1.0, max(0.0, total))


@dataclass(frozen=True)
class AdaptivePolicy:
    """Which samples draw how many more rollouts, round by round.

    `round_size`: draws per still-open sample per round (at least what could settle
    it: 2 for an untouched sample). `max_runs`: per-sample cap (None: no cap; then a
    budget is required). `budget`: total rollouts the run may hold. `balanced`: K
    passes and K non-passes instead of "mixed".
    """

    round_size: int = DEFAULT_ROUND_SIZE
    max_runs: int | None = 8
    budget: int | None = None
    balanced: int | None = None

    def __post_init__(self) -> None:
        if self.round_size < 1:
            raise UsageError("--round-size must be at least 1")
        if self.max_runs is not None and self.max_runs < 1:
            raise UsageError("--max-runs must be at least 1")
        if self.budget is not None and self.budget < 1:
            raise UsageError("--budget must be at least 1")
        if self.balanced is not None:
            if self.balanced < 1:
                raise UsageError("--balanced must be at least 1")
            if self.max_runs is not None and self.max_runs < 2 * self.balanced:
                raise UsageError(
                    f"--max-runs {self.max_runs} cannot hold {self.balanced} passes and "
                    f"{self.balanced} failures (need at least {2 * self.balanced})"
                )
        if self.max_runs is None and self.budget is None:
            raise UsageError("an adaptive run needs --max-runs or --budget (else it never ends)")

    def params(self) -> dict[str, Any]:
        """For the manifest: the fields above, by name."""
        return asdict(self)

    # -- per-sample rules --------------------------------------------------
    def needs(self, state: SampleState) -> tuple[int, int]:
        """(passes, non-passes) still missing before the sample settles."""
        if self.balanced is not None:
            k = self.balanced
            return max(0, k - state.successes), max(0, k - state.failures)
        if state.mixed:
            return 0, 0
        if state.n == 0:
            return 1, 1
        if state.lowest is not None and state.lowest >= PASS_SCORE:
            return 0, 1  # all passes so far: one non-pass opens it
        # All failures (or all the same partial credit, where a pass surely differs).
        return 1, 0

    def settled(self, state: SampleState) -> bool:
        """The sample has what it came for and leaves the pool."""
        return self.needs(state) == (0, 0)

    def room(self, state: SampleState) -> int | None:
        """Draws left under the cap (None: no cap)."""
        return None if self.max_runs is None else max(0, self.max_runs - state.n)

    def wanted(self, state: SampleState) -> int:
        """Draws this round when the budget does not bind."""
        if self.settled(state):
            return 0
        need = sum(self.needs(state))
        room = self.room(state)
        if room is not None and room == 0:
            return 0
        # A mixed sample that cannot reach K and K within the cap has its label; stop.
        # (An all-same one keeps drawing to the cap, which keeps labels equal to fixed N.)
        if room is not None and state.mixed and need > room:
            return 0
        want = max(self.round_size, need)
        return want if room is None else min(want, room)

    def open_chance(self, state: SampleState, draws: int, p: float) -> float:
        """P(the sample settles within `draws` more rollouts) at pass rate p."""
        need_pass, need_fail = self.needs(state)
        return binomial_range_probability(draws, p, need_pass, need_fail)

    # -- one round ---------------------------------------------------------
    def next_round(
        self,
        states: Mapping[str, SampleState],
        spent: int = 0,
        prior: BetaPrior | None = None,
    ) -> dict[str, int]:
        """sample_id -> rollouts to draw this round (empty: the run is over).

        `spent` is how many rollouts the run already holds (counted against the budget).
        """
        wants = {sid: w for sid, st in states.items() if (w := self.wanted(st)) > 0}
        if self.budget is None:
            return wants
        remaining = self.budget - spent
        if remaining <= 0 or not wants:
            return {}
        if sum(wants.values()) <= remaining:
            return wants
        prior = prior or prior_from_states(states.values())
        return self._ration(states, wants, remaining, prior)

    def _ration(
        self,
        states: Mapping[str, SampleState],
        wants: Mapping[str, int],
        remaining: int,
        prior: BetaPrior,
    ) -> dict[str, int]:
        """Spend `remaining` rollouts greedily on the best expected openings per rollout.

        A sample's first step is the fewest draws that could settle it; each further
        draw (up to what it wants) is a step of one. The chance of opening is concave
        in the draws beyond that first step, so the greedy order is the best split.
        """
        rates = {sid: prior.smooth(states[sid].successes, states[sid].n) for sid in wants}

        def gain(sid: str, have: int, step: int) -> float:
            st, p = states[sid], rates[sid]
            return (self.open_chance(st, have + step, p) - self.open_chance(st, have, p)) / step

        heap: list[tuple[float, str, int]] = []
        for sid in wants:
            first = min(sum(self.needs(states[sid])), wants[sid])
            heapq.heappush(heap, (-gain(sid, 0, first), sid, first))
        plan: dict[str, int] = {}
        while heap and remaining > 0:
            neg, sid, step = heapq.heappop(heap)
            if step > remaining:
                continue  # cannot pay for this step; a cheaper one may still fit
            if neg >= 0 and plan:
                # No chance of opening anywhere else either: stop spending on nothing.
                break
            have = plan.get(sid, 0) + step
            plan[sid] = have
            remaining -= step
            if have < wants[sid]:
                heapq.heappush(heap, (-gain(sid, have, 1), sid, 1))
        return plan


def prior_from_states(states: Iterable[SampleState]) -> BetaPrior:
    """Empirical-Bayes Beta prior on pass rates from the outcomes so far.

    The beta-binomial likelihood does not depend on a stopping rule that looks only
    at past outcomes, so the fit stays valid on adaptively stopped samples.
    """
    hist: dict[tuple[int, int], int] = {}
    for st in states:
        if st.n > 0:
            hist[(st.n, st.successes)] = hist.get((st.n, st.successes), 0) + 1
    return fit_beta_prior((n, float(c), w) for (n, c), w in hist.items())


# -- driving the policy without an engine ------------------------------------
@dataclass
class PolicyTrace:
    """What `run_policy` drew: each sample's outcomes in draw order, and the rounds."""

    outcomes: dict[str, list[float]]
    rounds: int = 0

    @property
    def rollouts(self) -> int:
        return sum(len(v) for v in self.outcomes.values())


def run_policy(
    policy: AdaptivePolicy,
    sample_ids: Iterable[str],
    draw: Callable[[str, int], Sequence[float]],
    *,
    max_rounds: int = 100_000,
) -> PolicyTrace:
    """Drive `policy` to the end; `draw(sample_id, k)` returns up to k new outcomes.

    A sample for which `draw` returns fewer outcomes than asked is exhausted and
    leaves the pool (a replayed sequence that ran out).
    """
    outcomes: dict[str, list[float]] = {sid: [] for sid in sample_ids}
    states = {sid: SampleState() for sid in outcomes}
    exhausted: set[str] = set()
    trace = PolicyTrace(outcomes=outcomes)
    while trace.rounds < max_rounds:
        pool = {sid: st for sid, st in states.items() if sid not in exhausted}
        plan = policy.next_round(pool, spent=trace.rollouts)
        if not plan:
            break
        trace.rounds += 1
        for sid, k in plan.items():
            got = list(draw(sid, k))[:k]
            if len(got) < k:
                exhausted.add(sid)
            outcomes[sid].extend(got)
            states[sid] = SampleState.of(outcomes[sid]) if got else states[sid]
    return trace


def replay(policy: AdaptivePolicy, sequences: Mapping[str, Sequence[float]]) -> PolicyTrace:
    """Replay stored outcomes (each sample's, in run order) through the policy."""
    cursor = dict.fromkeys(sequences, 0)

    def draw(sid: str, k: int) -> Sequence[float]:
        start = cursor[sid]
        cursor[sid] = start + k
        return sequences[sid][start : start + k]

    return run_policy(policy, sequences, draw)


def outcome_label(scores: Sequence[float]) -> str | None:
    """The outcome of a sequence of scores (`curate.core.outcome`; None: no outcome).

    "mixed" is every other case, including the same partial credit throughout.
    """
    return outcome_of_scores(scores)


# -- driving the policy against a backend ------------------------------------
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
    """Per-sample outcome counts from de-duplicated rollouts (sample_id, run_idx, score, error)."""
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
        pl.col("run_idx").max().alias("last"),
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
            .agg(pl.col("run_idx"))
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
    right = wrong = mixed = 0
    for st in states:
        if st.n == 0:
            continue
        if st.lowest is not None and st.lowest >= PASS_SCORE:
            right += 1
        elif st.highest is not None and st.highest <= 0.0:
            wrong += 1
        else:
            mixed += 1
    return right, wrong, mixed


def run_adaptive(
    store: RolloutStore,
    *,
    backend: Backend,
    grader: Grader,
    prompts: Mapping[str, Prompt],
    references: Mapping[str, Any],
    policy: AdaptivePolicy,
    sampling: SamplingConfig,
    mode: Mode,
    seed: int,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Progress | None = None,
) -> AdaptiveResult:
    """Draw rounds through `run_eval` until the policy has nothing left to ask.

    Every round starts from the run directory (so a resumed run rebuilds its state
    from the stored rollouts). A sample whose round brought no scored rollout (every
    attempt failed) sits out the rest of this invocation; a re-run retries it.
    """
    ids = list(prompts)
    cap_total = policy.budget if policy.budget is not None else len(ids) * (policy.max_runs or 0)
    shown = _RoundsProgress(progress or NullProgress(), cap_total)
    result = AdaptiveResult(params=policy.params(), samples=len(ids))
    stalled: set[str] = set()
    # Scored rollouts per sample before the last round, when that round had errors.
    check: dict[str, int] = {}
    start = time.perf_counter()
    try:
        while True:
            stored = stored_outcomes(store)
            now = state_from_store(stored, ids)
            stalled.update(sid for sid, n in check.items() if now.states[sid].n <= n)
            if result.rounds == 0:
                result.skipped = now.spent
                shown.stored = now.spent
            pool = {sid: st for sid, st in now.states.items() if sid not in stalled}
            plan = policy.next_round(pool, spent=now.spent)
            result.spent = now.spent
            if not plan:
                result.stop_reason = _stop_reason(policy, now, stalled)
                _final_counts(result, policy, now)
                break
            targets = {sid: target_count(now, sid, k) for sid, k in plan.items()}
            shown.base = _label_counts(st for sid, st in now.states.items() if sid not in plan)
            before = {sid: now.states[sid].n for sid in plan}
            res = run_eval(
                store,
                backend=backend,
                grader=grader,
                prompts=prompts,
                references=references,
                runs=targets,
                sampling=sampling,
                mode=mode,
                seed=seed,
                chunk_size=chunk_size,
                progress=shown,
                stored=stored,
            )
            result.rounds += 1
            result.rollouts += res.rollouts
            result.errors += res.errors
            result.truncated += res.truncated
            result.shards += res.shards
            check = before if res.errors else {}
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


def _final_counts(result: AdaptiveResult, policy: AdaptivePolicy, now: StoredState) -> None:
    for st in now.states.values():
        result.mixed += st.mixed
        result.settled += policy.settled(st)
        room = policy.room(st)
        result.capped += (not st.mixed) and room == 0
