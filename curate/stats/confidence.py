"""Token confidence: how sure a model was of the tokens it sampled, summarised per
rollout, and how well those summaries predict the grade.

The measures are DeepConf's (Fu et al., "Deep Think with Confidence", arXiv 2508.15260),
from the log-probabilities a backend returns with `curate eval --logprobs K`:

* token confidence C_i = -(1/K) * sum of the top K log-probabilities at step i (high
  when the model put its mass on few tokens);
* group confidence: the mean C_i over a sliding window of `window` tokens (every window
  of that many consecutive tokens; a trace shorter than the window is one group);
* lowest group confidence: the smallest group confidence of the trace;
* tail confidence: the mean C_i over the last `window` tokens;
* mean token confidence: the mean C_i over the whole trace.

Beside them: the mean log-probability of the sampled tokens, and the mean token entropy
over the top K (the entropy of the top K probabilities renormalised to sum to one; a
server gives no more of the distribution than that).

For early stopping, each trace also keeps the *record lows* of its group confidence:
(tokens generated when a full window first went below every earlier one, that value).
A trace stops at threshold s after the first record low below s, so these few pairs
replay DeepConf's online stop at any threshold without the per-token arrays.

`confidence_section` (the report's `confidence`) measures each summary against the grade:
ROC AUC of the summary for full credit, over all scored rollouts and within each
sample's group (averaged over the samples with both outcomes); the pass rate of the
rollouts a DeepConf-style offline filter keeps (the top 10% and the top 90% most
confident of each sample's rollouts); and what DeepConf's online early stop would have
saved (`early_stop`, the rule is documented there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from curate.stats.auc import roc_auc

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

# The largest K: the OpenAI-compatible backend asks for K + 1 alternatives per token (to
# hold the true top K, see curate.backends.openai_api), and OpenAI and vLLM's server
# list at most 20.
MAX_LOGPROBS: Final = 19
# DeepConf's group window is 2048 tokens, for traces of tens of thousands. curate's runs
# are usually far shorter (bounded by --max-tokens, often a few hundred tokens), and any
# trace shorter than the window is a single group, its lowest group confidence then
# only its mean. 64 tokens, a sentence or two of reasoning, keeps the measure local on
# such traces; set --confidence-window 2048 for long reasoning traces.
DEFAULT_WINDOW: Final = 64

# The per-rollout summary columns, and the orientation that makes "higher = more
# confident" (entropy is the one where lower is more confident).
SUMMARY_COLUMNS: Final = (
    "logprob_mean",
    "entropy_mean",
    "confidence_mean",
    "confidence_lowest_group",
    "confidence_tail",
)
LOW_AT, LOW = "confidence_low_at", "confidence_low"
ARRAY_COLUMNS: Final = ("token_logprobs", "top_logprobs")
MEASURES: Final = {
    "logprob_mean": ("mean log-probability", 1.0),
    "entropy_mean": ("low mean entropy", -1.0),
    "confidence_mean": ("mean confidence", 1.0),
    "confidence_lowest_group": ("lowest group confidence", 1.0),
    "confidence_tail": ("tail confidence", 1.0),
}
# The offline filter's cuts (DeepConf's eta): keep the top 10% / 90% most confident.
KEEP_SHARES: Final = (0.1, 0.9)
# DeepConf's warm-up: 16 traces per question set the stopping threshold.
WARMUP: Final = 16


def trace_summary(
    sampled: Sequence[float], tops: Sequence[Sequence[float]], window: int
) -> dict[str, Any]:
    """The summary columns of one trace (see the module docstring) from each sampled
    token's log-probability and the top K log-probabilities at each step. A trace
    without tokens has null summaries."""
    import numpy as np

    n = len(sampled)
    if n == 0:
        return {**dict.fromkeys(SUMMARY_COLUMNS), LOW_AT: [], LOW: []}
    conf, entropy = _per_token(tops)
    w = max(1, min(window, n))
    groups = _window_means(conf, w)
    low_at, low = record_lows(groups, w) if n >= window else ([], [])
    return {
        "logprob_mean": float(np.mean(np.asarray(sampled, dtype=np.float64))),
        "entropy_mean": float(entropy.mean()),
        "confidence_mean": float(conf.mean()),
        "confidence_lowest_group": float(groups.min()),
        "confidence_tail": float(conf[-w:].mean()),
        LOW_AT: low_at,
        LOW: low,
    }


def _per_token(tops: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Each step's token confidence and top-K entropy: as arrays at once when every
    step lists the same number of alternatives (the usual case), else step by step."""
    import numpy as np

    width = len(tops[0]) if tops else 0
    if width and all(len(step) == width for step in tops):
        values = np.asarray(tops, dtype=np.float64)
        shifted = np.exp(values - values.max(axis=1, keepdims=True))
        probs = shifted / shifted.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(probs > 0, probs * np.log(probs), 0.0)
        return -values.mean(axis=1), -terms.sum(axis=1)
    conf = np.array([-math.fsum(step) / len(step) if step else 0.0 for step in tops])
    return conf, np.array([_entropy(step) for step in tops])


def _entropy(step: Sequence[float]) -> float:
    """The entropy (nats) of the top-K probabilities renormalised to sum to one."""
    if not step:
        return 0.0
    top = max(step)
    weights = [math.exp(v - top) for v in step]
    total = math.fsum(weights)
    return -math.fsum(p / total * math.log(p / total) for p in weights if p > 0)


def _window_means(values: np.ndarray, w: int) -> np.ndarray:
    """The mean of every run of `w` consecutive values (len(values) - w + 1 of them)."""
    import numpy as np

    sums = np.concatenate(([0.0], np.cumsum(values, dtype=np.float64)))
    return (sums[w:] - sums[:-w]) / w


def record_lows(groups: np.ndarray, w: int) -> tuple[list[int], list[float]]:
    """(tokens generated, value) each time a window's group confidence went below every
    earlier window's: the window ending at token t has been seen after t + 1 tokens."""
    at: list[int] = []
    low: list[float] = []
    best = math.inf
    for i, g in enumerate(groups.tolist()):
        if g < best:
            best = g
            at.append(i + w)
            low.append(g)
    return at, low


def stop_point(low_at: Sequence[int], low: Sequence[float], threshold: float) -> int | None:
    """The tokens a trace generates before DeepConf's online stop at `threshold` (its
    group confidence first below it), or None when it is never below it."""
    for at, value in zip(low_at, low, strict=True):
        if value < threshold:
            return int(at)
    return None


# --------------------------------------------------------------------------- the report


def confidence_section(rows: pl.DataFrame) -> dict[str, Any] | None:
    """The report's `confidence` section from one row per rollout with `sample_id`,
    `rollout_idx`, `score`, `error`, `completion_tokens` and the summary columns; None when
    no scored rollout has the summaries (a run without --logprobs)."""
    import polars as pl

    scored = rows.filter(
        pl.col("error").is_null()
        & pl.col("score").is_not_null()
        & pl.col("confidence_mean").is_not_null()
    ).sort("sample_id", "rollout_idx")
    if scored.height == 0:
        return None
    right = (scored["score"] >= 1.0).to_list()
    measures = {}
    for column, (label, sign) in MEASURES.items():
        values = [sign * v for v in scored[column].to_list()]
        measures[column] = {
            "label": label,
            "auroc": _finite(roc_auc(values, right)),
            **_grouped_auroc(scored["sample_id"].to_list(), values, right),
            "kept": [
                {"keep": share, **_kept(scored["sample_id"].to_list(), values, right, share)}
                for share in KEEP_SHARES
            ],
        }
    return {
        "rollouts": scored.height,
        "pass_rate": sum(right) / len(right),
        "measures": measures,
        "early_stop": early_stop(scored),
    }


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _by_sample(ids: Sequence[str], *columns: Sequence[Any]) -> dict[str, list[tuple[Any, ...]]]:
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for row in zip(ids, *columns, strict=True):
        groups.setdefault(row[0], []).append(row[1:])
    return groups


def _grouped_auroc(
    ids: Sequence[str], values: Sequence[float], right: Sequence[bool]
) -> dict[str, Any]:
    """AUROC within each sample's rollouts, averaged over the samples with both a right
    and a wrong rollout (the only ones where it is defined): does confidence tell a
    sample's right rollouts from its wrong ones?"""
    aucs = [
        roc_auc([v for v, _ in group], [y for _, y in group])
        for group in _by_sample(ids, values, right).values()
    ]
    mixed = [a for a in aucs if not math.isnan(a)]
    return {
        "auroc_within_samples": sum(mixed) / len(mixed) if mixed else None,
        "mixed_samples": len(mixed),
    }


def _kept(
    ids: Sequence[str], values: Sequence[float], right: Sequence[bool], share: float
) -> dict[str, Any]:
    """DeepConf's offline filter: of each sample's rollouts, keep the floor(share * n)
    most confident, at least one (ties broken by rollout order); the pass rate of those
    kept. Floor, so that "the top 90%" of 8 rollouts is 7 of them, not all 8."""
    kept = passed = 0
    for group in _by_sample(ids, values, right).values():
        n = max(1, math.floor(share * len(group) + 1e-9))
        order = sorted(range(len(group)), key=lambda i: -group[i][0])[:n]
        kept += n
        passed += sum(1 for i in order if group[i][1])
    return {"rollouts": kept, "pass_rate": passed / kept if kept else None}


def early_stop(scored: pl.DataFrame) -> list[dict[str, Any]]:
    """What DeepConf's online early stop would have saved, replayed on finished traces.

    Per sample, in rollout order: the first min(16, half of its rollouts) are the
    warm-up (generated in full); the threshold s is the (100 - keep) th percentile
    (numpy's linear interpolation) of their lowest group confidences, for keep = 10%
    (DeepConf-low) and 90% (DeepConf-high). Every later rollout stops after the first
    token at which a full window's group confidence is below s (`stop_point`); a
    trace shorter than one window is never stopped. Reported over the later rollouts:
    the share stopped, the share of their completion tokens saved, and the pass rate of
    those not stopped against all of them.
    """
    import numpy as np

    groups = _by_sample(
        scored["sample_id"].to_list(),
        scored["confidence_lowest_group"].to_list(),
        scored[LOW_AT].to_list(),
        scored[LOW].to_list(),
        scored["completion_tokens"].to_list(),
        (scored["score"] >= 1.0).to_list(),
    )
    out = []
    for share in KEEP_SHARES:
        traces = stopped = tokens = saved = finished = finished_right = all_right = 0
        for group in groups.values():
            warm = min(WARMUP, len(group) // 2)
            if warm == 0:
                continue
            threshold = float(np.percentile([g[0] for g in group[:warm]], 100 * (1 - share)))
            for _, at, low, length, ok in group[warm:]:
                traces += 1
                all_right += bool(ok)
                length = int(length or 0)
                tokens += length
                stop = stop_point(at or [], low or [], threshold)
                if stop is not None and stop < length:
                    stopped += 1
                    saved += length - stop
                elif stop is not None:
                    stopped += 1  # stopped on its last token: nothing saved
                else:
                    finished += 1
                    finished_right += bool(ok)
        out.append(
            {
                "keep": share,
                "rollouts": traces,
                "stopped": stopped,
                "tokens_saved_share": saved / tokens if tokens else None,
                "pass_rate_finished": finished_right / finished if finished else None,
                "pass_rate_all": all_right / traces if traces else None,
            }
        )
    return out
