"""Per-sample rollout counts for a training run (seed 003's variance-minimising
allocation, seed 002's inverse-p allocation), as pure functions frame -> frame."""

from curate.allocation.apportion import apportion
from curate.allocation.plan import (
    METHODS,
    ZERO_SIGNAL,
    allocate,
    allocation_weights,
    join_plan,
    variance_proxy,
)

__all__ = [
    "METHODS",
    "ZERO_SIGNAL",
    "allocate",
    "allocation_weights",
    "apportion",
    "join_plan",
    "variance_proxy",
]
