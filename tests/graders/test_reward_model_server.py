"""`--grader reward-model` against the real thing: vLLM's OpenAI-compatible server (CPU
build) serving the bundled reward model `sample_data/tiny-reward`, one server per module.

The rollouts graded are real completions of the bundled policy `sample_data/tiny-math`
on `sample_data/arithmetic.jsonl` (`curate eval ... -n 4 --seed 0`, runs 0 and 1: 600
rollouts, 288 right by the numeric grader, one run to the 256-token limit), kept in
`data/tiny_math_rollouts.jsonl` so that this module needs no second engine. The reward
model must rank the right ones above the wrong ones: ROC AUC against the numeric
grader's verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from curate.graders import get_grader
from curate.graders.reward_model import RewardModelConfig, RewardModelGrader
from curate.stats.auc import roc_auc
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import VLLMServer
from tests.conftest import ARITHMETIC, ROOT, Result

pytestmark = pytest.mark.slow

REWARD_MODEL = ROOT / "sample_data" / "tiny-reward"
ROLLOUTS = Path(__file__).parent / "data" / "tiny_math_rollouts.jsonl"
# Measured 0.953 on this file (docs/guides/reward-models.md); a wiring fault (the completion
# not sent, the wrong label, the prompt dropped) gives about 0.5.
MIN_AUC = 0.80


@pytest.fixture(scope="module")
def reward_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    if not (REWARD_MODEL / "config.json").is_file():
        pytest.skip(f"{REWARD_MODEL} is not there")
    log = tmp_path_factory.mktemp("reward-vllm") / "server.log"
    server = VLLMServer(REWARD_MODEL, log_path=log)
    server.start(timeout=300)
    try:
        yield server
    finally:
        server.stop()


def rollouts() -> list[dict[str, object]]:
    return [json.loads(line) for line in ROLLOUTS.read_text().splitlines()]


@pytest.mark.parametrize("endpoint", ["auto", "pooling"])
def test_reward_scores_rank_right_answers_first(reward_server: VLLMServer, endpoint: str) -> None:
    rows = rollouts()
    grader = get_grader(
        "reward-model", reward_model=RewardModelConfig(reward_server.url, endpoint=endpoint)
    )
    assert isinstance(grader, RewardModelGrader)
    assert grader.endpoint == ("classify" if endpoint == "auto" else endpoint)
    # The prompt as the policy saw it (chat messages), and its completion.
    contexts = [{"prompt": [{"role": "user", "content": r["question"]}]} for r in rows]
    results = grader.grade_batch(
        [str(r["completion"]) for r in rows], ["unused"] * len(rows), contexts=contexts
    )
    # One completion ran to the policy's token limit: with its prompt it is longer than
    # the reward model's context, which the server refuses (400). That rollout is an
    # error row with the server's reason, never a score.
    errors = [r.error for r in results if r.error is not None]
    assert len(errors) == 1 and "maximum context length" in errors[0], errors[:3]
    scored = [(res, row) for res, row in zip(results, rows, strict=True) if res.error is None]
    assert all(r.raw_score is not None and 0.0 < r.score < 1.0 for r, _ in scored)  # type: ignore[operator]
    auc = roc_auc([r.raw_score for r, _ in scored], [bool(row["numeric"]) for _, row in scored])  # type: ignore[misc]
    assert auc > MIN_AUC, auc


def test_text_and_chat_prompts_get_the_same_reward(reward_server: VLLMServer) -> None:
    """The chat template the server applies to messages gives the text curate sends for
    a completion-mode prompt: one reward for both."""
    grader = get_grader("reward-model", reward_model=RewardModelConfig(reward_server.url))
    chat = [{"role": "user", "content": "What is 12 + 7?"}]
    text = "<s><|user|>What is 12 + 7?\n<|assistant|>"
    completions = ["19", "18"]
    by_chat = grader.grade_batch(completions, ["19"] * 2, contexts=[{"prompt": chat}] * 2)
    by_text = grader.grade_batch(
        [c + "</s>\n" for c in completions], ["19"] * 2, contexts=[{"prompt": text}] * 2
    )
    assert [r.raw_score for r in by_chat] == pytest.approx([r.raw_score for r in by_text])
    assert by_chat[0].raw_score != by_chat[1].raw_score  # the completion reached the model


def test_curate_eval_with_the_served_reward_model(
    reward_server: VLLMServer, cli: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = cli(
        "eval", ARITHMETIC, "--model", "fake-model", "--backend", "fake", "--limit", "4",
        "-n", "2", "--out", out, "--grader", "reward-model",
        "--reward-base-url", reward_server.base_url, "--score-range", "-20:20",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    stored = RolloutStore(out).rollouts()
    assert stored.height == 8 and stored["error"].null_count() == 8
    for score, raw in zip(stored["score"], stored["raw_score"], strict=True):
        assert score == pytest.approx((raw + 20) / 40)
    assert json.loads((out / "manifest.json").read_text())["reward_model"]["endpoint"] == "classify"
