"""What `curate eval` would generate, without starting a model (`curate eval --dry-run`):
the rollouts still missing, an estimate of their tokens, and the cost bound at given
prices (USD per million tokens). It reads the same `EvalOptions` as `evaluate`, and
resolves them the same way (policy, samples, mode, run directory)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.data.samples import build_prompts
from curate.evaluation.options import checked_policy, load_eval_samples
from curate.evaluation.sharding import shard_frame
from curate.stats.usage import cost_usd
from curate.store.run_dir import RolloutStore

if TYPE_CHECKING:
    from curate.core.prompts import Prompt
    from curate.evaluation.options import EvalOptions
    from curate.evaluation.preflight import Preflight

# Chat-template tokens per message (role markers, separators) when only counting text.
_MESSAGE_OVERHEAD = 4

TokenCounter = Callable[[str], int]


def _token_counter(model: str) -> tuple[TokenCounter, str]:
    """A function text -> token count, and its name: the model's own tokenizer when it
    is a local directory with tokenizer.json, else ~4 characters per token."""
    tokenizer_file = Path(model) / "tokenizer.json"
    if tokenizer_file.is_file():
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(tokenizer_file))
            return (lambda text: len(tok.encode(text, add_special_tokens=False).ids)), "tokenizer"
        except Exception:  # an unusual tokenizer file: fall back to the heuristic
            pass
    return (lambda text: math.ceil(len(text) / 4)), "chars/4"


def prompt_token_estimate(prompt: Prompt, count: TokenCounter) -> int:
    """Tokens of one prompt: its text, or each chat message's content plus the template's
    per-message overhead."""
    if isinstance(prompt, str):
        return int(count(prompt))
    return sum(int(count(str(m.get("content") or ""))) + _MESSAGE_OVERHEAD for m in prompt)


def estimate_eval(
    opts: EvalOptions,
    price_in: float | None = None,
    price_out: float | None = None,
    *,
    checked: Preflight | None = None,
) -> dict[str, Any]:
    """What `evaluate(opts)` would generate, without starting a model: the rollouts still
    missing from the run directory, an estimate of their prompt tokens, max_tokens per
    rollout as the completion bound, and the cost bound at the given prices.

    An adaptive run stops early on most samples: its figures are upper bounds (at most
    the per-sample cap, at most --budget in all, the longest prompts first). `runs` is
    None when an adaptive run has no per-sample cap (--budget alone). `checked` is the
    run's `preflight` when the caller has it (the samples are not loaded again)."""
    import polars as pl

    # The run's own option checks and per-sample cap, so the estimate never describes
    # a run that `evaluate` would refuse or cap differently.
    policy = checked_policy(opts)
    cap: int | None = opts.runs if policy is None else policy.max_runs
    budget = None if policy is None else policy.budget
    frame, fields = (checked.frame, checked.fields) if checked else load_eval_samples(opts)
    frame = shard_frame(frame, opts.shard)  # --shard: this task's share only
    # Without a local chat template to look at, assume chat (the usual case).
    mode = opts.known_mode() or "chat"
    prompts = build_prompts(frame, fields, mode, system=opts.system, source=opts.data)
    ids = frame["sample_id"].to_list()
    run_dir = opts.run_dir()
    store = RolloutStore(run_dir)
    stored: dict[str, int] = {}
    if not opts.force_new and store.shard_paths():
        done = store.completed_pairs()
        if cap is not None:
            done = done.filter(pl.col("rollout_idx") < cap)
        stored = dict(done.group_by("sample_id").len().iter_rows())
    held = [stored.get(sid, 0) for sid in ids]
    # Rollouts each sample may still take (None: no per-sample cap).
    room = [None if cap is None else cap - min(cap, h) for h in held]
    if budget is None:
        todo = sum(r or 0 for r in room)
    else:
        todo = max(0, budget - sum(held))
        if cap is not None:
            todo = min(todo, sum(r or 0 for r in room))
    count, counter_name = _token_counter(opts.model)
    per_rollout = [prompt_token_estimate(prompt, count) for prompt in prompts]
    # The costliest way to spend `todo` rollouts: the longest prompts first (for a
    # fixed-N run every sample takes all its room, so this is exact).
    prompt_tokens, left = 0, todo
    for tokens, r in sorted(zip(per_rollout, room, strict=True), key=lambda x: -x[0]):
        take = left if r is None else min(left, r)
        prompt_tokens += take * tokens
        left -= take
        if left == 0:
            break
    completion_tokens = todo * opts.max_tokens
    return {
        "run_dir": str(run_dir),
        "mode": mode,
        "samples": len(ids),
        "runs": cap,
        "rollouts_total": len(ids) * cap if cap is not None else budget,
        "rollouts_stored": sum(held),
        "rollouts_todo": todo,
        "prompt_tokens": prompt_tokens,
        "completion_tokens_max": completion_tokens,
        "token_count": counter_name,
        "cost_usd_max": cost_usd(prompt_tokens, completion_tokens, price_in, price_out),
    }
