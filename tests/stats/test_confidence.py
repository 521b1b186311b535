"""Token confidence (curate.stats.confidence): the per-trace summaries against a plain
re-implementation of DeepConf's definitions, AUROC against scipy's Mann-Whitney U on
random data of several shapes (ties, imbalance, groups), the offline filter and the
early-stop replay against a brute-force token-by-token stop."""

from __future__ import annotations

import math
import random

import numpy as np
import polars as pl
import pytest

from curate.stats.auc import roc_auc
from curate.stats.confidence import (
    LOW,
    LOW_AT,
    WARMUP,
    confidence_section,
    early_stop,
    stop_point,
    trace_summary,
)


def _random_trace(rng: random.Random, n: int, k: int) -> tuple[list[float], list[list[float]]]:
    """A trace of n steps with k listed alternatives each, peaked or flat at random."""
    sampled, tops = [], []
    for _ in range(n):
        raw = sorted((rng.gauss(0, rng.choice([0.3, 3.0])) for _ in range(k)), reverse=True)
        top = max(raw)
        norm = math.log(sum(math.exp(v - top) for v in raw) * 1.2) + top  # some mass elsewhere
        step = [v - norm for v in raw]
        tops.append(step)
        sampled.append(step[rng.randrange(k)])
    return sampled, tops


def _by_definition(sampled: list[float], tops: list[list[float]], window: int) -> dict[str, float]:
    """DeepConf's measures written out loop by loop, independent of the module."""
    conf = [-sum(step) / len(step) for step in tops]
    n = len(conf)
    w = min(window, n)
    groups = [sum(conf[i : i + w]) / w for i in range(n - w + 1)]
    entropies = []
    for step in tops:
        probs = [math.exp(v) for v in step]
        total = sum(probs)
        entropies.append(-sum(p / total * math.log(p / total) for p in probs))
    return {
        "logprob_mean": sum(sampled) / n,
        "entropy_mean": sum(entropies) / n,
        "confidence_mean": sum(conf) / n,
        "confidence_lowest_group": min(groups),
        "confidence_tail": sum(conf[-w:]) / w,
    }


@pytest.mark.parametrize("n, k, window", [(1, 1, 4), (7, 3, 64), (50, 5, 8), (300, 19, 64)])
def test_summaries_follow_the_definitions(n: int, k: int, window: int) -> None:
    rng = random.Random(n * 31 + k)
    sampled, tops = _random_trace(rng, n, k)
    got = trace_summary(sampled, tops, window)
    for name, value in _by_definition(sampled, tops, window).items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_a_peaked_trace_is_more_confident_than_a_flat_one() -> None:
    peaked = trace_summary([-0.01] * 10, [[-0.01, -6.0, -7.0]] * 10, 4)
    flat = trace_summary([-1.1] * 10, [[-1.0, -1.1, -1.2]] * 10, 4)
    for name in ("logprob_mean", "confidence_mean", "confidence_lowest_group", "confidence_tail"):
        assert peaked[name] > flat[name], name
    assert peaked["entropy_mean"] < flat["entropy_mean"]


def test_an_empty_trace_has_no_summaries() -> None:
    got = trace_summary([], [], 8)
    assert got["confidence_mean"] is None and got[LOW_AT] == [] and got[LOW] == []


@pytest.mark.parametrize("seed", range(5))
def test_record_lows_replay_a_token_by_token_stop(seed: int) -> None:
    """The stop read off the record lows is where a stop checked at every token
    (the group confidence of the last `window` tokens, once there are that many) fires,
    for thresholds across the trace's range."""
    rng = random.Random(seed)
    window = rng.choice([1, 3, 8])
    sampled, tops = _random_trace(rng, rng.randint(window, 80), 4)
    got = trace_summary(sampled, tops, window)
    conf = [-sum(step) / len(step) for step in tops]
    for threshold in np.linspace(min(conf) - 0.1, max(conf) + 0.1, 25):
        expected = None
        for t in range(window, len(conf) + 1):
            if sum(conf[t - window : t]) / window < threshold:
                expected = t
                break
        assert stop_point(got[LOW_AT], got[LOW], float(threshold)) == expected


def test_a_trace_shorter_than_the_window_is_never_stopped() -> None:
    got = trace_summary([-0.5] * 5, [[-0.5, -3.0]] * 5, 8)
    assert got[LOW_AT] == [] and stop_point(got[LOW_AT], got[LOW], 1e9) is None


@pytest.mark.parametrize(
    "n_pos, n_neg, tie_levels",
    [(1, 1, 0), (5, 95, 0), (50, 50, 3), (200, 20, 0), (30, 30, 1)],
)
def test_auroc_matches_scipy_mann_whitney(n_pos: int, n_neg: int, tie_levels: int) -> None:
    """Balanced and lopsided classes, continuous scores and heavily tied ones."""
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(n_pos * 1000 + n_neg + tie_levels)
    pos = rng.normal(0.5, 1.0, n_pos)
    neg = rng.normal(0.0, 1.0, n_neg)
    if tie_levels:
        pos, neg = np.round(pos * tie_levels), np.round(neg * tie_levels)
    scores = [*pos.tolist(), *neg.tolist()]
    labels = [True] * n_pos + [False] * n_neg
    u = stats.mannwhitneyu(pos, neg, alternative="two-sided").statistic
    assert roc_auc(scores, labels) == pytest.approx(u / (n_pos * n_neg), rel=1e-12)


def _rows(rng: np.random.Generator, samples: int, per: int, signal: float) -> pl.DataFrame:
    """A run: each sample has its own pass rate; confidence is higher on right rollouts
    by `signal` (0: no information)."""
    rows = []
    for s in range(samples):
        p = rng.uniform(0.1, 0.9)
        for r in range(per):
            right = bool(rng.random() < p)
            conf = rng.normal(5.0 + signal * right, 1.0)
            rows.append(
                {
                    "sample_id": f"s{s:03d}",
                    "rollout_idx": r,
                    "score": float(right),
                    "error": None,
                    "completion_tokens": 100,
                    "logprob_mean": conf - 6.0,
                    "entropy_mean": 6.0 - conf,
                    "confidence_mean": conf,
                    "confidence_lowest_group": conf,
                    "confidence_tail": conf,
                    LOW_AT: [50],
                    LOW: [conf],
                }
            )
    return pl.DataFrame(rows)


def test_section_auroc_kept_pass_rates_and_orientation() -> None:
    rng = np.random.default_rng(0)
    informative = confidence_section(_rows(rng, 60, 16, signal=2.0))
    blind = confidence_section(_rows(rng, 60, 16, signal=0.0))
    assert informative is not None and blind is not None
    for m in informative["measures"].values():
        # Entropy is oriented so that higher is more confident too.
        assert m["auroc"] > 0.8 and m["auroc_within_samples"] > 0.8, m["label"]
        kept10, kept90 = m["kept"]
        assert kept10["pass_rate"] > kept90["pass_rate"] > informative["pass_rate"] - 0.02
        assert kept10["rollouts"] == 60 * 1 and kept90["rollouts"] == 60 * 14  # floor(share*16)
    for m in blind["measures"].values():
        assert abs(m["auroc"] - 0.5) < 0.08, m["label"]


def test_section_is_none_without_summaries() -> None:
    frame = _rows(np.random.default_rng(1), 3, 4, 1.0).with_columns(
        pl.lit(None, dtype=pl.Float64).alias("confidence_mean")
    )
    assert confidence_section(frame) is None


def test_early_stop_uses_warm_up_percentiles() -> None:
    """One sample of 8 rollouts: the first 4 (half, under DeepConf's 16) are the warm-up.
    Their lowest group confidences 1, 2, 3, 4 give thresholds at the 90th (3.7) and
    10th (1.3) percentiles; later traces stop at their first record low below them."""
    assert WARMUP == 16
    lows = [1.0, 2.0, 3.0, 4.0, 3.5, 1.2, 5.0, 2.0]
    frame = pl.DataFrame(
        {
            "sample_id": ["a"] * 8,
            "rollout_idx": list(range(8)),
            "score": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0],
            "completion_tokens": [100] * 8,
            "confidence_lowest_group": lows,
            LOW_AT: [[10, 60]] * 8,
            LOW: [[9.0, v] for v in lows],
        }
    )
    keep10, keep90 = early_stop(frame)
    # keep 10% (threshold 3.7): 3.5, 1.2 and 2.0 stop at token 60; 5.0 finishes.
    assert keep10["rollouts"] == 4 and keep10["stopped"] == 3
    assert keep10["tokens_saved_share"] == pytest.approx(3 * 40 / 400)
    assert keep10["pass_rate_finished"] == 1.0 and keep10["pass_rate_all"] == 0.5
    # keep 90% (threshold 1.3): only 1.2 stops.
    assert keep90["stopped"] == 1 and keep90["pass_rate_finished"] == pytest.approx(2 / 3)


def test_ragged_steps_take_the_step_by_step_path() -> None:
    """A completions-form answer can list fewer alternatives at a step (two tokens with
    the same text): the summaries are the same definitions either way."""
    rng = random.Random(7)
    sampled, tops = _random_trace(rng, 30, 4)
    tops[5] = tops[5][:2]
    got = trace_summary(sampled, tops, 8)
    for name, value in _by_definition(sampled, tops, 8).items():
        assert got[name] == pytest.approx(value, rel=1e-9), name
