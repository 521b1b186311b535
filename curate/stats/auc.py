"""ROC AUC: how well a continuous score ranks right answers above wrong ones."""

from __future__ import annotations

import math
from collections.abc import Sequence


def roc_auc(scores: Sequence[float], labels: Sequence[bool | int]) -> float:
    """The probability that a random positive (label true) scores above a random
    negative, ties counting half: the Mann-Whitney U statistic over n_pos * n_neg.

    0.5 is a score that knows nothing, 1.0 one that ranks every positive first. NaN when
    either class is empty. Raises ValueError for unequal lengths or a NaN score.
    """
    if len(scores) != len(labels):
        raise ValueError(f"roc_auc: {len(scores)} scores but {len(labels)} labels")
    if any(math.isnan(s) for s in scores):
        raise ValueError("roc_auc: a score is NaN")
    positives = sum(1 for y in labels if y)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return math.nan
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    # Average ranks (1-based) over runs of equal scores.
    rank_sum = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        mid = (i + j) / 2 + 1
        rank_sum += mid * sum(1 for k in range(i, j + 1) if labels[order[k]])
        i = j + 1
    u = rank_sum - positives * (positives + 1) / 2
    return u / (positives * negatives)
