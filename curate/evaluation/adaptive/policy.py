"""The adaptive policy, pure: which samples draw how many more rollouts, round by
round, and the one round loop that drives it (no engine, no store, no polars).

`AdaptivePolicy.next_round` maps each sample's outcomes so far (`SampleState`) to the
draws of the next round. `run_rounds` runs the loop against an `OutcomeSource`:
`run_policy` and `replay` use a per-sample draw function (stored outcomes, a
simulation); the driver (`curate.evaluation.adaptive.driver`) uses a source backed by a
backend and the run directory.

Rules (Reinforce-Ada-Seq style):
- a sample leaves the pool once its outcomes are mixed (two scores differ), or with
  `balanced=K` once it has K passes (score >= 1) and K non-passes;
- a sample whose outcomes are still all the same keeps drawing until `max_runs`;
- with `budget`, when the remaining budget cannot pay for every wanted draw, it goes
  to the samples with the best chance of opening per rollout, on the smoothed pass
  rate (the posterior mean under the pass-rate prior), and the run stops when the budget is spent.

With `max_runs = N` and no budget, every sample ends with the same always-correct /
always-wrong / mixed label as a fixed-N run on the same outcome sequence: the
adaptive run sees a prefix of it, stops early only once the prefix is mixed (so the
whole sequence is mixed), and otherwise sees all N outcomes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from curate.core.outcome import PASS_SCORE, outcome_of_scores
from curate.errors import UsageError
from curate.stats.prior import fit_prior_counts

if TYPE_CHECKING:
    from curate.stats.prior import Prior

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
            raise UsageError("--max-rollouts must be at least 1")
        if self.budget is not None and self.budget < 1:
            raise UsageError("--budget must be at least 1")
        if self.balanced is not None:
            if self.balanced < 1:
                raise UsageError("--balanced must be at least 1")
            if self.max_runs is not None and self.max_runs < 2 * self.balanced:
                raise UsageError(
                    f"--max-rollouts {self.max_runs} cannot hold {self.balanced} passes and "
                    f"{self.balanced} failures (need at least {2 * self.balanced})"
                )
        if self.max_runs is None and self.budget is None:
            raise UsageError(
                "an adaptive run needs --max-rollouts or --budget (else it never ends)"
            )

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
        prior: Prior | None = None,
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
        prior: Prior,
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


def prior_from_states(states: Iterable[SampleState]) -> Prior:
    """The empirical-Bayes pass-rate prior (the NPMLE of `curate.stats.prior`) from the
    outcomes so far.

    The likelihood of an outcome sequence does not depend on a stopping rule that looks
    only at past outcomes, so the fit stays valid on adaptively stopped samples.
    """

    hist: dict[tuple[int, int], int] = {}
    for st in states:
        if st.n > 0:
            hist[(st.n, st.successes)] = hist.get((st.n, st.successes), 0) + 1
    return fit_prior_counts((n, float(c), w) for (n, c), w in hist.items())


# -- the round loop -----------------------------------------------------------
@dataclass(frozen=True)
class Observation:
    """What the loop knows before a round: each sample's outcomes so far, the rollouts
    the run holds (scored or failed: what a budget counts), and the samples that can
    give no more (a replayed sequence that ran out, a sample whose attempts all failed)."""

    states: Mapping[str, SampleState]
    spent: int
    exhausted: Collection[str] = frozenset()


class OutcomeSource(Protocol):
    """Where a round's outcomes come from: a replay or simulation (`run_policy`), or a
    backend through the run directory (`curate.evaluation.adaptive.driver`)."""

    def observe(self) -> Observation:
        """The state before the next round."""
        ...

    def draw(self, plan: Mapping[str, int]) -> None:
        """Draw `plan[sample_id]` more rollouts of each planned sample."""
        ...


def run_rounds(
    policy: AdaptivePolicy, source: OutcomeSource, *, max_rounds: int | None = None
) -> tuple[int, Observation]:
    """Observe, plan, draw, until the policy asks for nothing (or `max_rounds` rounds);
    returns the rounds run and the last observation. The one loop every driver runs."""
    rounds = 0
    while True:
        seen = source.observe()
        if max_rounds is not None and rounds >= max_rounds:
            return rounds, seen
        pool = {sid: st for sid, st in seen.states.items() if sid not in seen.exhausted}
        plan = policy.next_round(pool, spent=seen.spent)
        if not plan:
            return rounds, seen
        source.draw(plan)
        rounds += 1


# -- driving the policy without an engine ------------------------------------
@dataclass
class PolicyTrace:
    """What `run_policy` drew: each sample's outcomes in draw order, and the rounds."""

    outcomes: dict[str, list[float]]
    rounds: int = 0

    @property
    def rollouts(self) -> int:
        return sum(len(v) for v in self.outcomes.values())


class _PerSampleSource:
    """An OutcomeSource over `draw(sample_id, k) -> up to k outcomes`; a sample that
    gets fewer than asked is exhausted (a replayed sequence that ran out)."""

    def __init__(self, sample_ids: Iterable[str], draw: Callable[[str, int], Sequence[float]]):
        self.outcomes: dict[str, list[float]] = {sid: [] for sid in sample_ids}
        self.states = {sid: SampleState() for sid in self.outcomes}
        self.exhausted: set[str] = set()
        self._draw = draw

    def observe(self) -> Observation:
        spent = sum(len(v) for v in self.outcomes.values())
        return Observation(self.states, spent, self.exhausted)

    def draw(self, plan: Mapping[str, int]) -> None:
        for sid, k in plan.items():
            got = list(self._draw(sid, k))[:k]
            if len(got) < k:
                self.exhausted.add(sid)
            self.outcomes[sid].extend(got)
            if got:
                self.states[sid] = SampleState.of(self.outcomes[sid])


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
    source = _PerSampleSource(sample_ids, draw)
    rounds, _ = run_rounds(policy, source, max_rounds=max_rounds)
    return PolicyTrace(outcomes=source.outcomes, rounds=rounds)


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
