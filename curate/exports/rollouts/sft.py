"""`sft`: rejection-sampling fine-tuning data (RAFT, arXiv 2304.06767; best-of-N): the
right completions of every prompt, in TRL's SFT dataset format.

A completion qualifies when it earned full credit and was not cut short (error rows are
not in the pools at all). Within a prompt, equal texts count once (compared after the
reasoning choice, surrounding whitespace ignored); `per_prompt` keeps at most that many,
a seeded uniform draw among the distinct ones (all of them by default).

    conversational  {"messages": [...prompt, {"role": "assistant", "content": C}]}
    standard        {"prompt": P, "completion": C}

plus sample_id, rollout_idx and score for tracing each row back to the run.
"""

from __future__ import annotations

from typing import Any

from curate.exports.rollouts.pool import Pool, ScoredRollout, Style
from curate.exports.rollouts.shared import draw, rng_for


def distinct(rollouts: list[ScoredRollout]) -> list[ScoredRollout]:
    """The first rollout of each distinct text (whitespace at the ends ignored)."""
    seen: set[str] = set()
    out = []
    for r in rollouts:
        key = r.text.strip()
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def targets(pool: Pool, per_prompt: int | None, seed: int) -> list[ScoredRollout]:
    """The SFT targets of one prompt, in rollout_idx order."""
    right = distinct([r for r in pool.rollouts if r.passed and r.usable])
    return draw(right, per_prompt, rng_for(seed, "sft", pool.sample_id))


def records(
    pools: list[Pool], style: Style, per_prompt: int | None, seed: int
) -> list[dict[str, Any]]:
    rows = []
    for pool in pools:
        for r in targets(pool, per_prompt, seed):
            if style == "conversational":
                row: dict[str, Any] = {
                    "messages": [*pool.prompt, {"role": "assistant", "content": r.text}]
                }
            else:
                row = {"prompt": pool.prompt, "completion": r.text}
            rows.append(
                {**row, "sample_id": pool.sample_id, "rollout_idx": r.rollout_idx, "score": r.score}
            )
    return rows
