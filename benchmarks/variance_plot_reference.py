"""The variance-plot method's reference computation, re-implemented faithfully as the
speed baseline.

What the variance-plot method's `VarianceAnalyzer` does after the rollouts exist: a dict
of score lists
per sample (`self.results`), `compute_variance_metrics` (a per-sample Python loop with
np.mean / np.max / np.min / np.var / np.std), `identify_high_variance_samples` (the
threshold filter and the category counts) and `compute_improvement_potential` (mean
score, best-of-N, potential gain). No plotting and no per-sample printing; reading the
Parquet file into the dict of lists is part of the timed work.

    python benchmarks/variance_plot_reference.py SCORES.parquet [--threshold 0.01] [--limit N]

prints one JSON object: the seed's numbers plus `seconds` (the time inside this
process, reading included) and `samples`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict


def read_results(path: str, limit: int | None = None) -> dict[str, list[float]]:
    """`self.results`: sample id -> list of scores, in file order."""
    import polars as pl

    frame = pl.read_parquet(path, columns=["sample_id", "score"])
    if limit is not None:
        keep = frame["sample_id"].unique(maintain_order=True).head(limit)
        frame = frame.filter(pl.col("sample_id").is_in(keep.implode()))
    results: dict[str, list[float]] = defaultdict(list)
    ids, values = frame["sample_id"].to_list(), frame["score"].to_list()
    for sample_id, score in zip(ids, values, strict=True):
        results[sample_id].append(score)
    return results


def compute_variance_metrics(results: dict[str, list[float]]) -> list[dict]:
    import numpy as np

    metrics = []
    for sample_idx in sorted(results.keys()):
        scores = results[sample_idx]
        metrics.append(
            {
                "sample_idx": sample_idx,
                "mean_score": np.mean(scores),
                "best_score": np.max(scores),
                "worst_score": np.min(scores),
                "variance": np.var(scores),
                "std_dev": np.std(scores),
                "scores": scores,
            }
        )
    return metrics


def identify_high_variance_samples(metrics: list[dict], variance_threshold: float = 0.01):
    high_variance = [
        m for m in metrics if m["variance"] > variance_threshold and 0 < m["mean_score"] < 1.0
    ]
    # The seed prints these three counts; they are returned here instead.
    always_correct = sum(1 for m in metrics if m["best_score"] == 1.0 and m["variance"] == 0)
    always_incorrect = sum(1 for m in metrics if m["best_score"] == 0.0)
    return high_variance, always_correct, always_incorrect


def compute_improvement_potential(metrics: list[dict]) -> dict[str, float]:
    import numpy as np

    current_avg = np.mean([m["mean_score"] for m in metrics])
    best_of_n_avg = np.mean([m["best_score"] for m in metrics])
    potential_gain = best_of_n_avg - current_avg
    return {
        "current": float(current_avg),
        "best_of_n": float(best_of_n_avg),
        "potential_gain": float(potential_gain),
        "relative": float(potential_gain / current_avg),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--threshold", type=float, default=0.01)
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples")
    args = parser.parse_args()

    start = time.perf_counter()
    results = read_results(args.path, args.limit)
    metrics = compute_variance_metrics(results)
    high_variance, always_correct, always_incorrect = identify_high_variance_samples(
        metrics, args.threshold
    )
    potential = compute_improvement_potential(metrics)
    seconds = time.perf_counter() - start

    total = len(metrics)
    print(
        json.dumps(
            {
                "samples": total,
                "seconds": seconds,
                "categories": {
                    "always_correct": always_correct,
                    "always_incorrect": always_incorrect,
                    "high_variance": len(high_variance),
                    "low_variance": total - always_correct - always_incorrect - len(high_variance),
                },
                "high_variance_fraction": len(high_variance) / total,
                "mean_score": potential["current"],
                "best_of_n": potential["best_of_n"],
                "potential_gain": potential["potential_gain"],
                "relative_gain": potential["relative"],
            }
        )
    )


if __name__ == "__main__":
    main()
