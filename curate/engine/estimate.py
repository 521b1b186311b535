"""What `curate eval` would generate, without starting a model (`curate eval --dry-run`):
the rollouts still missing, an estimate of their tokens, and the cost bound at given
prices (USD per million tokens)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.stats.usage import cost_usd

if TYPE_CHECKING:
    from curate.backends.base import Prompt
    from curate.engine.evaluate import EvalOptions

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
    opts: EvalOptions, price_in: float | None = None, price_out: float | None = None
) -> dict[str, Any]:
    """What `evaluate(opts)` would generate, without starting a model: the rollouts still
    missing from the run directory, an estimate of their prompt tokens, max_tokens per
    rollout as the completion bound, and the cost bound at the given prices.

    An adaptive run stops early on most samples: its figures are upper bounds (at most
    --max-runs per sample, at most --budget in all)."""
    import polars as pl

    from curate.data.samples import build_prompts
    from curate.engine.evaluate import _local_chat_template, default_run_dir, load_eval_samples
    from curate.store.run_dir import RolloutStore

    frame, fields = load_eval_samples(opts)
    mode = opts.mode
    if mode is None:
        mode = "completion" if _local_chat_template(opts.model) is False else "chat"
    prompts = build_prompts(frame, fields, mode, system=opts.system, source=opts.data)
    ids = frame["sample_id"].to_list()
    run_dir = opts.out or default_run_dir(opts.data, opts.model)
    store = RolloutStore(run_dir)
    runs = opts.runs
    budget = opts.budget if opts.adaptive else None
    if opts.adaptive:
        runs = opts.max_runs or runs
    stored: dict[str, int] = {}
    if not opts.force_new and store.shard_paths():
        done = store.completed_pairs().filter(pl.col("run_idx") < runs)
        stored = dict(done.group_by("sample_id").len().iter_rows())
    count, counter_name = _token_counter(opts.model)
    todo = prompt_tokens = 0
    for sid, prompt in zip(ids, prompts, strict=True):
        missing = runs - min(runs, stored.get(sid, 0))
        if budget is not None:
            missing = min(missing, max(0, budget - todo))
        if missing:
            todo += missing
            prompt_tokens += missing * prompt_token_estimate(prompt, count)
    completion_tokens = todo * opts.max_tokens
    return {
        "run_dir": str(run_dir),
        "mode": mode,
        "samples": len(ids),
        "runs": runs,
        "rollouts_total": len(ids) * runs,
        "rollouts_stored": sum(min(runs, stored.get(sid, 0)) for sid in ids),
        "rollouts_todo": todo,
        "prompt_tokens": prompt_tokens,
        "completion_tokens_max": completion_tokens,
        "token_count": counter_name,
        "cost_usd_max": cost_usd(prompt_tokens, completion_tokens, price_in, price_out),
    }
