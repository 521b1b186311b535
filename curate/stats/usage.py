"""Token usage and cost: what a run spent (`usage_summary`) and what one would spend
(`estimate_eval`, for `curate eval --dry-run`). Prices are USD per million tokens."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from curate.engine.evaluate import EvalOptions

TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens")
# Chat-template tokens per message (role markers, separators) when only counting text.
_MESSAGE_OVERHEAD = 4


def cost_usd(
    prompt_tokens: float | None,
    completion_tokens: float | None,
    price_in: float | None,
    price_out: float | None,
) -> float | None:
    """The cost at the given prices (a price not given counts as 0); None without prices."""
    if price_in is None and price_out is None:
        return None
    spent_in = (prompt_tokens or 0) * (price_in or 0.0)
    spent_out = (completion_tokens or 0) * (price_out or 0.0)
    return (spent_in + spent_out) / 1e6


def usage_summary(
    rollouts: pl.DataFrame, price_in: float | None = None, price_out: float | None = None
) -> dict[str, Any]:
    """{prompt_tokens, completion_tokens, cost_usd} summed over `rollouts`; a count is None
    when the column is missing or empty, the cost None without prices."""
    totals: dict[str, int | None] = {}
    for col in TOKEN_COLUMNS:
        if col in rollouts.columns and rollouts[col].null_count() < rollouts.height:
            totals[col] = int(rollouts[col].sum())
        else:
            totals[col] = None
    return {
        "prompt_tokens": totals["prompt_tokens"],
        "completion_tokens": totals["completion_tokens"],
        "cost_usd": cost_usd(
            totals["prompt_tokens"], totals["completion_tokens"], price_in, price_out
        ),
    }


def load_token_columns(path: str | Path) -> pl.DataFrame | None:
    """The token columns of a run directory (every stored row: a rollout that a resume
    replaced was paid for too) or of a score table; None when it has none."""
    import polars as pl

    from curate.store.run_dir import RolloutStore, is_run_dir
    from curate.store.tables import read_table, scan_table

    path = Path(path)
    try:
        if path.is_dir():
            if not is_run_dir(path):
                return None
            store = RolloutStore(path)
            shards = store.shard_paths()
            if not shards or not all(c in pl.read_parquet_schema(shards[0]) for c in TOKEN_COLUMNS):
                return None
            return store.scan(list(TOKEN_COLUMNS)).drop("_shard").collect()
        # A .json file may hold one JSON array, which only the eager reader understands;
        # anything else is scanned, so a table without token columns costs no read.
        lf = read_table(path).lazy() if path.suffix.lower() == ".json" else scan_table(path)
        cols = [c for c in TOKEN_COLUMNS if c in lf.collect_schema().names()]
        if not cols:
            return None
        return lf.select(pl.col(c).cast(pl.Int64, strict=False) for c in cols).collect()
    except Exception:  # the report itself names unreadable input; usage is optional
        return None


def report_usage(
    path: str | Path, price_in: float | None, price_out: float | None
) -> dict[str, Any] | None:
    """The report's `usage` section: None when the input has no token counts and no
    price was given (so reports of plain score tables keep their shape)."""
    import polars as pl

    frame = load_token_columns(path)
    if frame is None:
        if price_in is None and price_out is None:
            return None
        frame = pl.DataFrame()
    usage = usage_summary(frame, price_in, price_out)
    no_tokens = usage["prompt_tokens"] is None and usage["completion_tokens"] is None
    if no_tokens and price_in is None and price_out is None:
        return None
    return usage


# --------------------------------------------------------------------------- dry run


def _token_counter(model: str) -> tuple[Any, str]:
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


def prompt_token_estimate(prompt: Any, count: Any) -> int:
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
    budget = getattr(opts, "budget", None) if getattr(opts, "adaptive", False) else None
    if getattr(opts, "adaptive", False):
        runs = getattr(opts, "max_runs", None) or runs
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
