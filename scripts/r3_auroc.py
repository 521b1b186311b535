"""How well R3 (`--grader r3`, no verifier) separates right from wrong rollouts: the
AUROC of the R3 score against the numeric grader's verdict on the same completions.

    python scripts/r3_auroc.py                      # tiny-think, 100 problems, N = 8
    python scripts/r3_auroc.py --limit 40 -n 4 --out runs/r3-auroc-small

Runs (or resumes) `curate eval --grader r3` with the offline vLLM engine, then grades the
stored completions with `numeric` (no model) and prints the AUROC: the chance that a
rollout the numeric grader calls right has a higher R3 than one it calls wrong (ties
count one half). Rollouts without an answer (reasoning never closed) are left out: R3
scores them 0 by rule, not by certainty, so they would flatter the figure.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from curate.evaluation.evaluate import evaluate
from curate.evaluation.options import EvalOptions
from curate.graders import get_grader
from curate.store.certainty import read_certainties
from curate.store.run_dir import RolloutStore


@dataclass(frozen=True)
class Separation:
    auroc: float
    right: int
    wrong: int
    samples: int


def auroc(scores: list[float], labels: list[bool]) -> float:
    """P(score of a positive > score of a negative), ties one half (Mann-Whitney U)."""
    ranked = sorted(zip(scores, labels, strict=True), key=lambda pair: pair[0])
    positives = sum(labels)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        raise ValueError("AUROC needs both right and wrong rollouts")
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mid = (i + 1 + j) / 2  # the average 1-based rank of the tie block
        rank_sum += mid * sum(1 for _, label in ranked[i:j] if label)
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def separation(run: Path) -> Separation:
    """R3 against `numeric` on the stored rollouts of `run` that R3 scored by certainty."""
    import json

    import polars as pl

    store = RolloutStore(run)
    rollouts = store.rollouts().filter(pl.col("error").is_null())
    certain = read_certainties(run).select("sample_id", "rollout_idx")
    scored = rollouts.join(certain, on=["sample_id", "rollout_idx"], how="inner")
    samples = store.read_samples()
    field = json.loads(store.manifest_path.read_text(encoding="utf-8"))["answer_field"]
    if samples is None:
        raise SystemExit(f"{run}: no samples file")
    answer = dict(zip(samples["sample_id"].to_list(), samples[field].to_list(), strict=True))
    grader = get_grader("numeric")
    try:
        completions = scored["completion"].fill_null("").to_list()
        references = [answer[sid] for sid in scored["sample_id"].to_list()]
        verdicts = grader.grade_batch(completions, references)
    finally:
        grader.close()
    labels = [bool(v.score) for v in verdicts]
    value = auroc(scored["score"].to_list(), labels)
    return Separation(value, sum(labels), len(labels) - sum(labels), scored["sample_id"].n_unique())


def measure(
    out: Path,
    *,
    model: str = "sample_data/tiny-think",
    data: str = "sample_data/arithmetic.jsonl",
    limit: int = 100,
    rollouts: int = 8,
    max_tokens: int = 96,
) -> Separation:
    """Run (or resume) the r3 evaluation into `out`, then measure its separation."""
    evaluate(
        EvalOptions(
            data=Path(data),
            model=model,
            runs=rollouts,
            out=out,
            grader="r3",
            max_tokens=max_tokens,
            limit=limit,
            seed=0,
        )
    )
    return separation(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="sample_data/tiny-think")
    parser.add_argument("--data", default="sample_data/arithmetic.jsonl")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("-n", "--rollouts", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=Path("runs/r3-auroc"))
    args = parser.parse_args()
    result = measure(
        args.out,
        model=args.model,
        data=args.data,
        limit=args.limit,
        rollouts=args.rollouts,
        max_tokens=args.max_tokens,
    )
    print(
        f"R3 vs numeric on {args.out}: AUROC {result.auroc:.3f} over {result.right} right and "
        f"{result.wrong} wrong rollouts of {result.samples} samples"
    )


if __name__ == "__main__":
    main()
