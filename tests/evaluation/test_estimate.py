"""`curate eval --dry-run` as a library call: rollouts still to generate, their token
estimate and the cost bound, without starting a model."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import pytest

from curate.errors import UsageError
from curate.evaluation.estimate import _token_counter, estimate_eval, prompt_token_estimate
from curate.evaluation.evaluate import evaluate
from tests.conftest import TINY_MODEL
from tests.evaluation.conftest import fake_options

_opts = partial(fake_options, runs=4, max_tokens=8)


def _questions(data: Path) -> list[str]:
    return [json.loads(line)["question"] for line in data.read_text().splitlines()]


def _chat_tokens(question: str) -> int:
    """chars/4 for the one user message, plus the per-message template overhead."""
    return math.ceil(len(question) / 4) + 4


def test_prompt_token_estimate_text_and_messages() -> None:
    count, name = _token_counter("no-such-model-directory")
    assert name == "chars/4"
    assert count("") == 0 and count("abcd") == 1 and count("abcde") == 2
    assert prompt_token_estimate("abcdefgh", count) == 2
    messages = [{"role": "system", "content": "abcd"}, {"role": "user", "content": None}]
    assert prompt_token_estimate(messages, count) == (1 + 4) + (0 + 4)


def test_fresh_run_counts_every_rollout(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    e = estimate_eval(_opts(arithmetic_jsonl, out))
    per_run = sum(_chat_tokens(q) for q in _questions(arithmetic_jsonl))
    assert e == {
        "run_dir": str(out),
        "mode": "chat",
        "samples": 12,
        "runs": 4,
        "rollouts_total": 48,
        "rollouts_stored": 0,
        "rollouts_todo": 48,
        "prompt_tokens": 4 * per_run,
        "completion_tokens_max": 48 * 8,
        "token_count": "chars/4",
        "cost_usd_max": None,  # no prices given
    }
    assert not out.exists()  # an estimate writes nothing

    priced = estimate_eval(_opts(arithmetic_jsonl, out), price_in=1.0, price_out=2.0)
    assert priced["cost_usd_max"] == pytest.approx((4 * per_run * 1 + 384 * 2) / 1e6)
    text = estimate_eval(_opts(arithmetic_jsonl, out, mode="completion"))
    assert text["mode"] == "completion"
    assert text["prompt_tokens"] == 4 * sum(
        math.ceil(len(q) / 4) for q in _questions(arithmetic_jsonl)
    )


def test_stored_rollouts_are_not_counted_again(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, out, limit=3))
    e = estimate_eval(_opts(arithmetic_jsonl, out))
    assert (e["rollouts_stored"], e["rollouts_todo"]) == (12, 36)
    assert e["completion_tokens_max"] == 36 * 8
    assert e["prompt_tokens"] == 4 * sum(_chat_tokens(q) for q in _questions(arithmetic_jsonl)[3:])
    # More runs per sample: the stored ones still count; --force-new starts over.
    more = estimate_eval(_opts(arithmetic_jsonl, out, runs=6))
    assert (more["rollouts_stored"], more["rollouts_todo"]) == (12, 60)
    fresh = estimate_eval(_opts(arithmetic_jsonl, out, force_new=True))
    assert (fresh["rollouts_stored"], fresh["rollouts_todo"]) == (0, 48)


def test_adaptive_figures_are_upper_bounds(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    capped = estimate_eval(_opts(arithmetic_jsonl, out, adaptive=True, max_runs=6))
    assert (capped["runs"], capped["rollouts_todo"]) == (6, 72)
    longest = max(_chat_tokens(q) for q in _questions(arithmetic_jsonl))
    # --budget alone: no per-sample cap (as the run itself), so one sample may take it all.
    budgeted = estimate_eval(_opts(arithmetic_jsonl, out, adaptive=True, budget=30))
    assert budgeted["runs"] is None and budgeted["rollouts_total"] == 30
    assert budgeted["rollouts_todo"] == 30 and budgeted["completion_tokens_max"] == 30 * 8
    assert budgeted["prompt_tokens"] == 30 * longest
    # A budget beyond samples x runs is still reachable without a cap.
    deep = estimate_eval(_opts(arithmetic_jsonl, out, adaptive=True, budget=100))
    assert deep["rollouts_todo"] == 100
    # Cap and budget: the budget goes to the longest prompts first, each up to the cap.
    both = estimate_eval(_opts(arithmetic_jsonl, out, adaptive=True, max_runs=2, budget=5))
    costs = sorted((_chat_tokens(q) for q in _questions(arithmetic_jsonl)), reverse=True)
    assert both["rollouts_todo"] == 5
    assert both["prompt_tokens"] == 2 * costs[0] + 2 * costs[1] + costs[2]


def test_budget_counts_what_the_run_holds(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, out, limit=3))  # 12 rollouts stored
    e = estimate_eval(_opts(arithmetic_jsonl, out, adaptive=True, budget=30))
    assert (e["rollouts_stored"], e["rollouts_todo"]) == (12, 18)


def test_options_are_checked_as_the_run_checks_them(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(UsageError, match="only apply with --adaptive"):
        estimate_eval(_opts(arithmetic_jsonl, out, budget=30))
    with pytest.raises(UsageError, match="--max-rollouts must be at least 1"):
        estimate_eval(_opts(arithmetic_jsonl, out, adaptive=True, max_runs=0))


def test_counts_with_the_model_tokenizer(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    if not (TINY_MODEL / "tokenizer.json").is_file():
        pytest.skip(f"{TINY_MODEL} is not there yet")
    e = estimate_eval(
        _opts(arithmetic_jsonl, tmp_path / "run", model=str(TINY_MODEL), runs=2),
        price_in=1.0,
        price_out=1.0,
    )
    assert (e["token_count"], e["mode"], e["rollouts_todo"]) == ("tokenizer", "chat", 24)
    assert e["prompt_tokens"] > 0 and e["cost_usd_max"] is not None
