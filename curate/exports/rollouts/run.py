"""`export_rollouts`: a run's rollouts as training data (the library call behind
`curate export`): check the request (before anything is read), load the pools, build
the rows of the chosen format, write them as JSON Lines or Parquet, all or nothing."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.seeds import DEFAULT_SEED
from curate.errors import RunError, UsageError
from curate.exports.base import JSONL_SUFFIXES, PARQUET_SUFFIXES, write_jsonl_lines
from curate.exports.rollouts import dpo, groups, sft
from curate.exports.rollouts.pool import (
    REASONING_CHOICES,
    STYLES,
    Reasoning,
    Style,
    load_pools,
)
from curate.stats.balanced import DEFAULT_BALANCED_SIZE, DEFAULT_OBJECTIVE, check_group_size
from curate.stats.weights import DEFAULT_DELTA, OBJECTIVES, check_objective
from curate.store.atomic import atomic_path

KINDS = ("sft", "dpo", "groups", "balanced")


@dataclass(frozen=True)
class RolloutExportRequest:
    """Export the rollouts of the run directory `run` as `kind` (sft, dpo, groups,
    balanced) to `output` (.jsonl or .parquet).

    `style` conversational (message lists) or standard (text); None: the run's own
    (chat -> conversational). `reasoning` keep (in the completion, inside the model's
    think markers) or drop. `per_prompt`: most SFT completions or DPO pairs per prompt
    (None: all). `group_size`: groups' draw per prompt (None: the whole pool) and
    balanced's group (default 8, even). `objective` and `delta`: the group weight
    (`curate.stats.weights`). `seed` fixes every draw. Writing no row is a RunError.
    """

    run: str | os.PathLike[str]
    output: str | os.PathLike[str]
    kind: str
    style: Style | None = None
    reasoning: Reasoning = "keep"
    per_prompt: int | None = None
    group_size: int | None = None
    objective: str = DEFAULT_OBJECTIVE
    delta: float = DEFAULT_DELTA
    seed: int = DEFAULT_SEED


@dataclass
class RolloutExportResult:
    kind: str
    path: Path
    rows: int
    prompts: int  # prompts with at least one row
    pools: int  # prompts with a scored rollout
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> prompts or rollouts
    style: Style = "conversational"


def check_export(request: RolloutExportRequest) -> tuple[Path, Path, int | None]:
    """(run, output, group size): UsageError on the first bad option, before reading."""
    r = request
    if r.kind not in KINDS:
        raise UsageError(f"--as {r.kind!r}: choose from {', '.join(KINDS)}")
    output = Path(r.output)
    if output.suffix.lower() not in (*JSONL_SUFFIXES, *PARQUET_SUFFIXES):
        raise UsageError(f"{output}: export writes .jsonl or .parquet")
    if r.style is not None and r.style not in STYLES:
        raise UsageError(f"--style {r.style!r}: expected conversational or standard")
    if r.reasoning not in REASONING_CHOICES:
        raise UsageError(f"--reasoning {r.reasoning!r}: expected keep or drop")
    if r.per_prompt is not None:
        if r.kind not in ("sft", "dpo"):
            raise UsageError(f"--per-prompt caps sft completions or dpo pairs, not --as {r.kind}")
        if r.per_prompt < 1:
            raise UsageError(f"--per-prompt must be at least 1 (got {r.per_prompt})")
    size = r.group_size
    if size is not None and r.kind not in ("groups", "balanced"):
        raise UsageError(f"--group-size sets groups or balanced groups, not --as {r.kind}")
    if r.kind == "balanced":
        size = DEFAULT_BALANCED_SIZE if size is None else size
        check_group_size(size)
    elif size is not None and size < 1:
        raise UsageError(f"--group-size must be at least 1 (got {size})")
    if r.objective not in OBJECTIVES:
        raise UsageError(f"--weights {r.objective!r}: choose from {', '.join(OBJECTIVES)}")
    check_objective(r.objective, r.delta)
    return Path(r.run), output, size


def export_rollouts(request: RolloutExportRequest) -> RolloutExportResult:
    """Check, read, build and write (see the module docstring); the output's directory
    must exist."""
    run, output, size = check_export(request)
    r = request
    if not output.absolute().parent.is_dir():
        raise UsageError(f"{output}: its directory does not exist")
    loaded = load_pools(run, reasoning=r.reasoning, style=r.style)
    pools = loaded.pools
    left_out: dict[str, int] = {}
    if loaded.errors:
        left_out["error rollouts"] = loaded.errors
    if r.kind in ("sft", "dpo"):
        cut = sum(not x.usable for p in pools for x in p.rollouts)
        if cut:
            left_out["cut-short rollouts"] = cut
        build = sft.records if r.kind == "sft" else dpo.records
        rows = build(pools, loaded.style, r.per_prompt, r.seed)
    else:
        kept, skipped = groups.eligible(pools, r.kind, size)
        if skipped:
            why = (
                "prompts with one outcome or a pool under the group size"
                if r.kind == "balanced"
                else "prompts with a pool under the group size"
            )
            left_out[why] = skipped
        rows = groups.records(
            kept, r.kind, group_size=size, objective=r.objective, delta=r.delta, seed=r.seed
        )
    if not rows:
        raise RunError(f"{run}: no {r.kind} rows to export ({_why(left_out)}); nothing written")
    write_rows(rows, output)
    return RolloutExportResult(
        kind=r.kind,
        path=output,
        rows=len(rows),
        prompts=len({row["sample_id"] for row in rows}),
        pools=len(pools),
        left_out=left_out,
        style=loaded.style,
    )


def _why(left_out: dict[str, int]) -> str:
    return ", ".join(f"{n} {what}" for what, n in left_out.items()) or "no prompt qualified"


def write_rows(rows: list[dict[str, Any]], output: Path) -> None:
    """The rows as JSON Lines or Parquet (by suffix), renamed into place when complete."""
    with atomic_path(output) as tmp:
        if output.suffix.lower() in PARQUET_SUFFIXES:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(rows), tmp)
        else:
            write_jsonl_lines(rows, tmp)
