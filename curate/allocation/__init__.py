"""Per-sample rollout counts for a training run (DynaMO's variance-minimising
allocation, Reinforce-Ada's inverse-p weight), as pure functions frame -> frame;
`plan_rollouts` plans a run or score table (what `curate allocate` calls)."""

from curate.allocation.plan import (
    DEFAULT_ZERO_SIGNAL,
    METHODS,
    ZERO_SIGNAL,
    allocate,
    allocation_weights,
    join_plan,
    variance_proxy,
)
from curate.allocation.run import RolloutPlan, plan_rollouts

__all__ = [
    "DEFAULT_ZERO_SIGNAL",
    "METHODS",
    "ZERO_SIGNAL",
    "RolloutPlan",
    "allocate",
    "allocation_weights",
    "join_plan",
    "plan_rollouts",
    "variance_proxy",
]
