"""The fake backend's long completions (`completion_chars`): deterministic per seed, within
the asked length, a think block without digits before the answer, stored as the reasoning
and graded like any other completion."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from curate.backends.base import GenerationRequest, SamplingConfig
from curate.backends.fake import FakeBackend, long_text, open_fake
from curate.evaluation.evaluate import evaluate
from curate.store.run_dir import RolloutStore
from tests.conftest import fake_eval_options

SAMPLING = SamplingConfig(temperature=1.0, top_p=1.0, max_tokens=20000)


def _texts(backend: FakeBackend, seed: int) -> list[str | None]:
    req = GenerationRequest(sample_id="s", prompt="What is 2 + 2?", n=4, first_run=0, seed=seed)
    return [g.text for g in backend.generate([req], SAMPLING, "completion")[0]]


def test_long_text_length_and_alphabet() -> None:
    rng = random.Random(3)
    for _ in range(200):
        text = long_text(rng, 4000, 16000)
        body = text.removeprefix("<think>").removesuffix("</think>")
        assert text.startswith("<think>") and text.endswith("</think>")
        assert 4000 <= len(body) <= 16000
        assert not any(ch.isdigit() for ch in body)


def test_same_seed_same_completions_other_seed_others() -> None:
    backend = FakeBackend(answers={"What is 2 + 2?": ("4", 0.5)}, completion_chars=(4000, 16000))
    first, again, other = _texts(backend, 7), _texts(backend, 7), _texts(backend, 8)
    assert first == again
    assert first != other
    assert len({len(t or "") for t in first}) > 1  # lengths vary within a request
    for text in first:
        assert text is not None and text.rsplit("</think>", 1)[1] in {"4", "49"}


def test_environment_variable_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CURATE_FAKE_COMPLETION_CHARS", "100:200")
    with open_fake("fake") as backend:
        assert backend.completion_chars == (100, 200)


def test_long_completions_graded_and_stored(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(
        '{"id": "a", "question": "What is 2 + 2?", "answer": "4"}\n'
        '{"id": "b", "question": "What is 3 + 3?", "answer": "6"}\n'
    )
    answers = {"What is 2 + 2?": ("4", 1.0), "What is 3 + 3?": ("6", 0.0)}
    opts = fake_eval_options(
        data, tmp_path / "run", answers, grader="numeric", runs=4, max_tokens=20000
    )
    opts.engine_options["completion_chars"] = (4000, 16000)  # type: ignore[index]
    outcome = evaluate(opts)
    assert outcome.result.rollouts == 8 and outcome.result.errors == 0
    rows = RolloutStore(outcome.run_dir).rollouts().sort("sample_id", "rollout_idx")
    # The think block is stored apart from the answer, as the reasoning.
    assert rows["reasoning"].str.len_chars().min() >= 4000  # type: ignore[operator]
    assert rows["completion"].to_list() == ["4"] * 4 + ["69"] * 4
    assert not rows["truncated"].any()
    assert rows.filter(rows["sample_id"] == "a")["score"].to_list() == [1.0] * 4
    assert rows.filter(rows["sample_id"] == "b")["score"].to_list() == [0.0] * 4
