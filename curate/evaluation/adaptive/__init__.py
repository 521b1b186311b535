"""Adaptive evaluation: draw rollouts in rounds and stop a sample as soon as it has
learning signal (the gate view of standardised GRPO: a group is useful only when its
outcomes differ).

Two modules, one loop:

- `policy`: pure. `AdaptivePolicy` says how many more rollouts each sample draws
  next round; `run_rounds` is the round loop (observe, plan, draw) over any
  `OutcomeSource`; `run_policy` and `replay` drive it with a per-sample draw function.
- `driver`: `run_adaptive(store, evaluation, policy)` drives the same loop with a
  source backed by the backend (one `run_eval` per round) and the run directory.
The rules are in `policy`.
"""

from curate.evaluation.adaptive.driver import (
    AdaptiveResult,
    StoredState,
    run_adaptive,
    state_from_store,
    target_count,
)
from curate.evaluation.adaptive.policy import (
    DEFAULT_ROUND_SIZE,
    AdaptivePolicy,
    Observation,
    OutcomeSource,
    PolicyTrace,
    SampleState,
    binomial_range_probability,
    outcome_label,
    prior_from_states,
    replay,
    run_policy,
    run_rounds,
)

__all__ = [
    "DEFAULT_ROUND_SIZE",
    "AdaptivePolicy",
    "AdaptiveResult",
    "Observation",
    "OutcomeSource",
    "PolicyTrace",
    "SampleState",
    "StoredState",
    "binomial_range_probability",
    "outcome_label",
    "prior_from_states",
    "replay",
    "run_adaptive",
    "run_policy",
    "run_rounds",
    "state_from_store",
    "target_count",
]
