"""A `--grader r3` run's reference prefills are tokens the model read: the report's usage
counts them (`prefill_tokens`, in the cost as prompt tokens); other runs are unchanged."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from curate.report.build import with_prefill
from curate.store.certainty import append_certainties
from curate.store.run_dir import RolloutStore


def _store(tmp_path: Path) -> RolloutStore:
    store = RolloutStore(tmp_path / "run")
    store.create()
    return store


def _certainties(store: RolloutStore, lengths: list[int]) -> None:
    n = len(lengths)
    append_certainties(
        store.run_dir,
        pl.DataFrame(
            {
                "sample_id": ["a"] * n,
                "rollout_idx": list(range(n)),
                "tokens": [["1", "0"]] * n,
                "logprobs": [[-0.1, -0.2]] * n,
                "tokens_in": lengths,
            }
        ),
    )


def test_prefill_tokens_are_added_and_priced(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _certainties(store, [30, 31, 32])
    usage = {"prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.5}
    out = with_prefill(usage, store, price_in=1000.0)
    assert out is not None and out["prefill_tokens"] == 93
    assert out["cost_usd"] == 0.5 + 93 * 1000.0 / 1e6
    assert usage == {"prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.5}  # not mutated


def test_a_run_without_prefills_or_a_table_is_unchanged(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "cost_usd": None}
    assert with_prefill(usage, _store(tmp_path), price_in=None) is usage
    assert with_prefill(None, None, price_in=None) is None


def test_prefills_without_other_token_counts_still_show(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _certainties(store, [7])
    out = with_prefill(None, store, price_in=None)
    assert out == {
        "prompt_tokens": None,
        "completion_tokens": None,
        "cost_usd": None,
        "prefill_tokens": 7,
    }
