#!/usr/bin/env python
"""How well a reward-model run's rewards rank right answers first: ROC AUC of its
`raw_score` against the `numeric` grader's 0/1 verdict on the same completions.

    curate eval sample_data/arithmetic.jsonl --model sample_data/tiny-math -n 4 \\
        --grader reward-model --reward-base-url http://127.0.0.1:8001 --out runs/rm
    python scripts/check_reward_model.py runs/rm

Prints the AUC over all scored rollouts and by the data set's `difficulty` column when
it has one. 0.5 is a reward that knows nothing about correctness; 1.0 ranks every right
answer above every wrong one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from curate.graders import get_grader  # noqa: E402
from curate.stats.auc import roc_auc  # noqa: E402
from curate.store.run_dir import RolloutStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run directory graded with --grader reward-model")
    ap.add_argument("--answer-field", default="answer")
    args = ap.parse_args()

    store = RolloutStore(args.run)
    samples = store.read_samples()
    if samples is None:
        raise SystemExit(f"{args.run}: no samples.parquet")
    references = dict(zip(samples["sample_id"], samples[args.answer_field], strict=True))
    bands = (
        dict(zip(samples["sample_id"], samples["difficulty"], strict=True))
        if "difficulty" in samples.columns
        else {}
    )
    stored = store.rollouts()
    rollouts = stored.filter(stored["raw_score"].is_not_null())
    if rollouts.height == 0:
        raise SystemExit(f"{args.run}: no rollout has a raw_score (not a reward-model run?)")
    sids = rollouts["sample_id"].to_list()
    grader = get_grader("numeric")
    try:
        verdicts = grader.grade_batch(
            [c or "" for c in rollouts["completion"].to_list()], [references[s] for s in sids]
        )
    finally:
        grader.close()
    labels = [v.score == 1.0 for v in verdicts]
    rewards = rollouts["raw_score"].to_list()
    print(
        f"{args.run}: {len(labels)} rollouts, {sum(labels)} right by numeric: "
        f"AUC {roc_auc(rewards, labels):.3f}"
    )
    for band in sorted(set(bands.values())):
        idx = [i for i, s in enumerate(sids) if bands.get(s) == band]
        right = sum(labels[i] for i in idx)
        auc = roc_auc([rewards[i] for i in idx], [labels[i] for i in idx])
        print(f"  {band:<10} {len(idx):5d} rollouts, {right:5d} right: AUC {auc:.3f}")


if __name__ == "__main__":
    main()
