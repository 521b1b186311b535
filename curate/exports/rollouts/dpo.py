"""`dpo`: preference pairs from mixed groups, in TRL's preference dataset format.

Pairing rule, per prompt: the distinct right completions (full credit) and the distinct
wrong ones (less than full credit), neither cut short, are each shuffled with a seeded
draw and paired in order, so every completion is in at most one pair and a prompt gives
min(right, wrong) pairs (`per_prompt` caps that). A prompt whose rollouts are all right
or all wrong gives none.

    conversational  {"prompt": [...], "chosen": [{"role": "assistant", ...}],
                     "rejected": [{"role": "assistant", ...}]}
    standard        {"prompt": P, "chosen": C, "rejected": R}

plus sample_id, chosen_rollout_idx, rejected_rollout_idx, chosen_score, rejected_score.
"""

from __future__ import annotations

from typing import Any

from curate.exports.rollouts.pool import Pool, ScoredRollout, Style
from curate.exports.rollouts.sft import distinct
from curate.exports.rollouts.shared import rng_for


def pairs(
    pool: Pool, per_prompt: int | None, seed: int
) -> list[tuple[ScoredRollout, ScoredRollout]]:
    """(chosen, rejected) pairs of one prompt."""
    rng = rng_for(seed, "dpo", pool.sample_id)
    right = distinct([r for r in pool.rollouts if r.passed and r.usable])
    wrong = distinct([r for r in pool.rollouts if not r.passed and r.usable])
    rng.shuffle(right)
    rng.shuffle(wrong)
    out = [(c, r) for c, r in zip(right, wrong, strict=False) if c.text.strip() != r.text.strip()]
    return out if per_prompt is None else out[:per_prompt]


def _message(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def records(
    pools: list[Pool], style: Style, per_prompt: int | None, seed: int
) -> list[dict[str, Any]]:
    rows = []
    for pool in pools:
        for chosen, rejected in pairs(pool, per_prompt, seed):
            if style == "conversational":
                body: dict[str, Any] = {
                    "prompt": pool.prompt,
                    "chosen": _message(chosen.text),
                    "rejected": _message(rejected.text),
                }
            else:
                body = {"prompt": pool.prompt, "chosen": chosen.text, "rejected": rejected.text}
            rows.append(
                {
                    **body,
                    "sample_id": pool.sample_id,
                    "chosen_rollout_idx": chosen.rollout_idx,
                    "rejected_rollout_idx": rejected.rollout_idx,
                    "chosen_score": chosen.score,
                    "rejected_score": rejected.score,
                }
            )
    return rows
