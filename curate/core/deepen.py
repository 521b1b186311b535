"""Deepening a run: more rollouts for a random subset of its all-same prompts.

`curate eval ... --deepen K --to M` resumes a fixed-N run and draws rollouts up to M
for K prompts chosen at random among those whose first N rollouts all failed (the
always-incorrect stratum) or all passed (always-correct). It pins the tails of the
pass-rate prior, which N rollouts cannot (a prompt never solved in 8 could have any
pass rate below about 3/8).

The rule every reader of a run follows (one rule, here): on a run whose manifest has
a `deepen` record, a rollout with rollout_idx >= the run's nominal N (the manifest's
`runs`) is a *deepening row*. Every per-sample figure (pass rate, categories, pass@k,
the mixed share at G <= N, filters and exports) reads the first N rollouts of every
prompt only, so a deepened run describes its prompts exactly as before; only the
pass-rate prior is fitted on every rollout (`curate.analysis.load`), and through it
every model-based figure (extrapolation past N, intervals, the multiplier).

Why the prior may use the deepening rows as they are: whether a prompt is deepened
depends only on its first N outcomes being all equal and on a coin (a hash of the
run's seed and the sample id) independent of its pass rate. The likelihood of each
prompt's outcome sequence, prod p^c (1 - p)^(n - c), does not involve such a choice,
as it does not involve an adaptive run's stopping rule, so the NPMLE of the prior
is fitted on every prompt's (n, c) with no reweighting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

# The manifest key: a list of deepen records, oldest first.
DEEPEN_KEY = "deepen"
# Which all-same prompts `--deepen-stratum` draws from; "both" splits K between the
# always-incorrect and always-correct prompts in proportion to their numbers.
INCORRECT, CORRECT, BOTH = "incorrect", "correct", "both"
STRATA = (BOTH, INCORRECT, CORRECT)


@dataclass(frozen=True)
class DeepenRequest:
    """What `--deepen K --to M --deepen-stratum S` asks for."""

    k: int
    to: int
    stratum: str = BOTH

    def same_as(self, record: Mapping[str, Any], nominal: int) -> bool:
        """Whether `record` (a manifest deepen record) was made by this request on a
        run of `nominal` rollouts per prompt: then its choice of prompts is reused."""
        return (
            record.get("k") == self.k
            and record.get("to") == self.to
            and record.get("stratum") == self.stratum
            and record.get("nominal_runs") == nominal
        )


def deepen_records(manifest: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The manifest's deepen records (empty for a run never deepened)."""
    records = (manifest or {}).get(DEEPEN_KEY)
    return [dict(r) for r in records] if isinstance(records, list) else []


def deepening_start(manifest: Mapping[str, Any] | None) -> int | None:
    """The rollout_idx at which a deepened run's deepening rows begin: its nominal N (the
    manifest's `runs`). None for a run never deepened: every row counts."""
    if not deepen_records(manifest):
        return None
    runs = (manifest or {}).get("runs")
    return runs if isinstance(runs, int) and runs >= 1 else None


def descriptive_rows(manifest: Mapping[str, Any] | None) -> pl.Expr | None:
    """The filter that keeps a run's descriptive rows (every row but the deepening
    ones: rollout_idx below the nominal N); None when every row counts."""
    import polars as pl

    start = deepening_start(manifest)
    return None if start is None else pl.col("rollout_idx") < start


def draw_key(seed: int, sample_id: str) -> bytes:
    """The coin that orders a stratum's prompts: a hash of the run's seed and the sample
    id, independent of the prompt's outcomes. The first K in this order are deepened,
    so a larger K deepens a superset of a smaller K's prompts."""
    return hashlib.blake2b(f"{seed}\x1fdeepen\x1f{sample_id}".encode(), digest_size=16).digest()


def split_k(k: int, sizes: Mapping[str, int]) -> dict[str, int]:
    """K split between the strata in proportion to their sizes (largest remainder,
    ties to the stratum listed first), never more than a stratum holds."""
    total = sum(sizes.values())
    k = min(k, total)
    if total == 0:
        return dict.fromkeys(sizes, 0)
    exact = {s: k * n / total for s, n in sizes.items()}
    out = {s: int(v) for s, v in exact.items()}
    left = k - sum(out.values())
    order = sorted(sizes, key=lambda s: -(exact[s] - out[s]))
    for s in order[:left]:
        out[s] += 1
    return out


def choose(pools: Mapping[str, Sequence[str]], k: int, seed: int) -> dict[str, list[str]]:
    """The prompts to deepen: per stratum, its share of K (`split_k`) taken in the order
    of `draw_key` (so the choice does not depend on the order of `pools`)."""
    shares = split_k(k, {s: len(ids) for s, ids in pools.items()})
    return {
        s: sorted(ids, key=lambda sid: draw_key(seed, sid))[: shares[s]] for s, ids in pools.items()
    }
