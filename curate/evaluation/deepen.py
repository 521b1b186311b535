"""`curate eval ... --deepen K --to M`: which prompts of a run to deepen, and how far.

The choice itself and the rule that tells deepening rows from the run's own are in
`curate.core.deepen`. Here: the request's checks (one line each, exit 2, before any
work), the two strata of a finished fixed-N run read from its first N rollouts, and
the manifest record that makes an interrupted deepen resume the same choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.deepen import (
    BOTH,
    CORRECT,
    DEEPEN_KEY,
    INCORRECT,
    STRATA,
    DeepenRequest,
    choose,
    deepen_records,
)
from curate.errors import UsageError

if TYPE_CHECKING:
    from curate.store.run_dir import RolloutStore


@dataclass(frozen=True)
class DeepenPlan:
    """The prompts to deepen (by stratum), the manifest record of the choice, and
    whether it was read back from the manifest (a resumed deepen)."""

    record: dict[str, Any]
    resumed: bool

    @property
    def targets(self) -> dict[str, int]:
        """Rollouts per chosen prompt (rollout_idx 0..to-1), for `Evaluation.with_runs`."""
        to = int(self.record["to"])
        return {sid: to for ids in self.record["samples"].values() for sid in ids}

    def line(self) -> str:
        """One line on what this deepen covers, for the end of `curate eval`."""
        r = self.record
        chosen = {s: len(ids) for s, ids in r["samples"].items()}
        parts = [
            f"{chosen[s]} of {r['pool'][s]} always {s}"
            for s in (INCORRECT, CORRECT)
            if r["pool"].get(s)
        ]
        return (
            f"deepen: {sum(chosen.values())} prompts ({', '.join(parts)} in their first "
            f"{r['nominal_runs']}) at up to {r['to']} rollouts each; the report's per-sample "
            f"figures keep the first {r['nominal_runs']}"
        )


def deepen_request(
    k: int | None,
    to: int | None,
    stratum: str | None,
    *,
    adaptive: bool,
    shard: bool,
    force_new: bool,
) -> DeepenRequest | None:
    """The request `--deepen K --to M --deepen-stratum S` make (None without
    --deepen), or a one-line UsageError for a request that cannot mean anything."""
    if k is None:
        given = [f for f, v in (("--to", to), ("--deepen-stratum", stratum)) if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --deepen K")
        return None
    if k < 1:
        raise UsageError(f"--deepen K must be at least 1 prompt, not {k}")
    if to is None:
        raise UsageError("--deepen K needs --to M: the rollouts each chosen prompt ends with")
    chosen = stratum if stratum is not None else BOTH
    if chosen not in STRATA:
        raise UsageError(f"--deepen-stratum must be one of {', '.join(STRATA)}, not {chosen!r}")
    if adaptive:
        raise UsageError(
            "--deepen does not combine with --adaptive: it deepens a fixed-N run, whose "
            "first N rollouts of every prompt stay its descriptive figures"
        )
    if shard:
        raise UsageError("--deepen does not combine with --shard: its choice is the whole run's")
    if force_new:
        raise UsageError("--deepen does not combine with --force-new: it adds to a run")
    return DeepenRequest(k=k, to=to, stratum=chosen)


def plan_deepen(
    store: RolloutStore,
    previous: Mapping[str, Any] | None,
    request: DeepenRequest,
    sample_ids: Sequence[str],
    runs: int,
    seed: int,
) -> DeepenPlan:
    """The prompts `request` deepens in the run at `store`, made with `previous` as its
    manifest and resumed with `runs` (-n) and `seed`: read back from the manifest when
    the same request made it before (an interrupted deepen resumes its own choice),
    else chosen now among the all-same prompts of the first N rollouts."""
    where = store.run_dir
    if previous is None:
        raise UsageError(
            f"{where}: --deepen adds to a finished run and there is none here; run "
            "curate eval without --deepen first"
        )
    if previous.get("adaptive"):
        raise UsageError(
            f"{where}: --deepen applies to fixed-N runs and this one is adaptive (its "
            "all-same prompts already drew up to the cap)"
        )
    nominal = previous.get("runs")
    if nominal != runs:
        raise UsageError(
            f"{where}: this run has -n {nominal}; give -n {nominal} with --deepen (the first "
            "N rollouts of every prompt stay the run's own)"
        )
    if request.to <= runs:
        raise UsageError(
            f"--to {request.to} must be more than the run's {runs} rollouts per prompt"
        )
    for record in deepen_records(previous):
        if request.same_as(record, runs):
            return DeepenPlan(record=record, resumed=True)
    tally = store.pair_tally(list(sample_ids), runs)
    if tally.missing:
        raise UsageError(
            f"{where}: {tally.missing} of the first {runs} rollouts per prompt are still "
            "missing; finish the run (the same command without --deepen) before deepening it"
        )
    pools = all_same_prompts(store, sample_ids, runs, where)
    wanted = (INCORRECT, CORRECT) if request.stratum == BOTH else (request.stratum,)
    pools = {s: pools[s] for s in wanted}
    if not any(pools.values()):
        what = " or ".join(f"always {s}" for s in wanted)
        raise UsageError(
            f"{where}: no prompt is {what} in its first {runs} rollouts: nothing to deepen"
        )
    chosen = choose(pools, request.k, seed)
    record = {
        "k": request.k,
        "to": request.to,
        "stratum": request.stratum,
        "nominal_runs": runs,
        "seed": seed,
        "pool": {s: len(ids) for s, ids in pools.items()},
        "samples": chosen,
    }
    return DeepenPlan(record=record, resumed=False)


def all_same_prompts(
    store: RolloutStore, sample_ids: Sequence[str], runs: int, where: Path
) -> dict[str, list[str]]:
    """The prompts whose first `runs` rollouts are all scored and all 0 (incorrect) or
    all 1 (correct), sorted by id. A run with other scores (partial credit) is refused:
    the pass-rate prior the deepening pins is the one of 0/1 scores."""
    import polars as pl

    rows = store.rollouts(["sample_id", "rollout_idx", "score", "error"]).filter(
        (pl.col("rollout_idx") < runs) & pl.col("sample_id").is_in(list(sample_ids))
    )
    scored = rows.filter(pl.col("error").is_null())
    if not scored.select(pl.col("score").is_in([0.0, 1.0]).all()).item():
        raise UsageError(
            f"{where}: --deepen needs 0/1 scores, and this run's grader gives partial credit"
        )
    per = scored.group_by("sample_id").agg(pl.len().alias("n"), pl.col("score").sum().alias("c"))
    full = per.filter(pl.col("n") == runs)
    return {
        INCORRECT: sorted(full.filter(pl.col("c") == 0)["sample_id"].to_list()),
        CORRECT: sorted(full.filter(pl.col("c") == runs)["sample_id"].to_list()),
    }


def with_record(
    manifest: dict[str, Any], previous: Mapping[str, Any] | None, plan: DeepenPlan | None
) -> dict[str, Any]:
    """`manifest` with the run's deepen records: those of `previous` (a resume must not
    drop them, or the report would count deepening rows as the run's own) and this
    call's, once."""
    records = deepen_records(previous)
    if plan is not None and not plan.resumed:
        records.append(plan.record)
    if records:
        manifest[DEEPEN_KEY] = records
    return manifest
