"""`--logprobs K` as a run setting: recorded in the manifest's sampling with its window,
a resume with another K or window refused like any sampling change, while keeping the
per-token arrays or not may change between calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.errors import UsageError
from curate.evaluation.evaluate import evaluate
from curate.stats.confidence import DEFAULT_WINDOW
from curate.store.run_dir import RolloutStore
from tests.conftest import fake_eval_options


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, dict[str, list[object]]]:
    rows = [
        {"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, {r["question"]: [r["answer"], 0.5] for r in rows}


def _eval(data: tuple[Path, dict[str, list[object]]], run: Path, **fields: object) -> None:
    path, answers = data
    settings: dict[str, object] = {"runs": 2, "grader": "numeric", **fields}
    evaluate(fake_eval_options(path, run, answers, **settings))


def test_manifest_records_k_and_window_and_resume_refuses_another_k(
    data: tuple[Path, dict[str, list[object]]], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    _eval(data, run, logprobs=5)
    sampling = RolloutStore(run).read_manifest()["sampling"]
    assert sampling["logprobs"] == 5 and sampling["confidence_window"] == DEFAULT_WINDOW
    with pytest.raises(UsageError, match=r"logprobs 5 -> 6"):
        _eval(data, run, logprobs=6, runs=3)
    with pytest.raises(UsageError, match=r"logprobs 5 -> None"):
        _eval(data, run, runs=3)
    with pytest.raises(UsageError, match=r"confidence_window 64 -> 8"):
        _eval(data, run, logprobs=5, confidence_window=8, runs=3)
    # Keeping the arrays is storage, not sampling: a resume may turn it on.
    _eval(data, run, logprobs=5, keep_token_logprobs=True, runs=3)


def test_a_run_without_logprobs_records_none_of_it(
    data: tuple[Path, dict[str, list[object]]], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    _eval(data, run)
    sampling = RolloutStore(run).read_manifest()["sampling"]
    assert set(sampling) == {"temperature", "top_p", "max_tokens", "stop"}
    assert RolloutStore(run).rollouts()["confidence_mean"].null_count() == 6


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"logprobs": 0}, "--logprobs must be from 1 to 19, not 0"),
        ({"logprobs": 20}, "--logprobs must be from 1 to 19, not 20"),
        ({"logprobs": 3, "confidence_window": 0}, "--confidence-window must be at least 1"),
        ({"keep_token_logprobs": True}, "--keep-token-logprobs needs --logprobs K"),
        ({"confidence_window": 8}, "--confidence-window needs --logprobs K"),
    ],
)
def test_bad_settings_are_usage_errors_before_anything_is_written(
    data: tuple[Path, dict[str, list[object]]],
    tmp_path: Path,
    fields: dict[str, object],
    message: str,
) -> None:
    with pytest.raises(UsageError, match=message):
        _eval(data, tmp_path / "run", **fields)
    assert not (tmp_path / "run").exists()
