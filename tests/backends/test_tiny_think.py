"""The bundled reasoning model (sample_data/tiny-think) through both serving paths.

Fast: its tokenizer has `<think>` and `</think>` as single, non-special tokens (what vLLM's
reasoning parsers look up, and what a decode that skips special tokens keeps), and its chat
template does not open the block itself.

Slow (one vLLM OpenAI server with `--reasoning-parser deepseek_r1` for the module): the
server sends the reasoning apart from the answer, as production reasoning models do; and the
same data with the same seeds evaluated through the offline engine with the same parser and
through the server give the same reasoning/answer split, the same scores and the same
truncation counts, with a max_tokens small enough that some thoughts are cut.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import ARITHMETIC, ROOT, TEST_ENGINE_OPTIONS

THINK_MODEL = ROOT / "sample_data" / "tiny-think"
PARSER = "deepseek_r1"
SAMPLES = 24  # the first problems of the bundled set: every difficulty band
RUNS = 4
# Short enough that long thoughts (three-digit sums, products) are cut, long enough that
# one-digit problems finish.
MAX_TOKENS = 40


def test_think_tokens_are_single_non_special_tokens() -> None:
    AutoTokenizer = pytest.importorskip("transformers").AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(THINK_MODEL))
    text = "<think>3+4: 3+4=7, so 7</think>7"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    vocab = tok.get_vocab()
    assert ids[0] == vocab["<think>"] and vocab["</think>"] in ids
    assert "<think>" not in tok.all_special_tokens and "</think>" not in tok.all_special_tokens
    assert tok.decode(ids, skip_special_tokens=True) == text
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "What is 3 + 4?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "<s><|user|>What is 3 + 4?\n<|assistant|>"  # the model opens <think>


# ----------------------------------------------------------------- the real engine


@pytest.fixture(scope="module")
def think_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("vllm")
    pytest.importorskip("openai")
    from tests.backends.fault_proxy import VLLMServer

    class ReasoningServer(VLLMServer):
        def command(self) -> list[str]:
            return [*super().command(), "--reasoning-parser", PARSER]

    log = tmp_path_factory.mktemp("think-server") / "server.log"
    server = ReasoningServer(THINK_MODEL, log_path=log)
    server.start(timeout=300)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("think-data") / "arith.jsonl"
    path.write_text("\n".join(ARITHMETIC.read_text().splitlines()[:SAMPLES]) + "\n")
    return path


@pytest.mark.slow
def test_server_sends_reasoning_apart_from_the_answer(think_server: Any) -> None:
    body = json.dumps(
        {
            "model": str(THINK_MODEL),
            "messages": [{"role": "user", "content": "What is 37 + 48?"}],
            "max_tokens": 80,
            "temperature": 0,
        }
    ).encode()
    req = urllib.request.Request(
        f"{think_server.base_url}/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        message = json.load(resp)["choices"][0]["message"]
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    assert reasoning and reasoning.startswith("37+48:"), message
    assert message["content"] and "<think>" not in message["content"], message
    assert "</think>" not in reasoning and "</think>" not in message["content"]


def _evaluate(
    data: Path, out: Path, backend: str, engine: dict[str, Any], **fields: Any
) -> pl.DataFrame:
    from curate.evaluation.evaluate import evaluate
    from curate.evaluation.options import EvalOptions
    from curate.store.run_dir import RolloutStore

    outcome = evaluate(
        EvalOptions(
            data=data,
            model=str(THINK_MODEL),
            backend=backend,
            runs=RUNS,
            out=out,
            grader="numeric",
            max_tokens=MAX_TOKENS,
            seed=0,
            engine_options=engine,
            **fields,
        )
    )
    assert outcome.result.errors == 0
    return RolloutStore(outcome.run_dir).rollouts().sort("sample_id", "rollout_idx")


# Token confidence on both paths: K alternatives, a window short enough that the
# thoughts here (up to MAX_TOKENS tokens) have several groups.
CONFIDENCE = {"logprobs": 5, "confidence_window": 8, "keep_token_logprobs": True}
# Log-probabilities cross the server as JSON from the same engine: equal to float32
# rounding, not to the bit.
LOGPROB_TOLERANCE = 1e-5


@pytest.mark.slow
def test_offline_engine_and_server_agree(think_server: Any, data: Path, tmp_path: Path) -> None:
    """The same data and seeds through the offline engine and the server store the same
    rows: text, split, scores, finish reasons, truncation, and every token count (the
    server's per-choice counts, not shares of a request's total), with and without
    log-probabilities; and the confidence summaries agree to float rounding."""
    from curate.stats.confidence import SUMMARY_COLUMNS, trace_summary

    offline = _evaluate(
        data,
        tmp_path / "offline",
        "vllm",
        {**TEST_ENGINE_OPTIONS, "reasoning_parser": PARSER},
        **CONFIDENCE,
    )
    served = _evaluate(
        data, tmp_path / "served", "openai", {"base_url": think_server.base_url}, **CONFIDENCE
    )
    plain = _evaluate(data, tmp_path / "plain", "openai", {"base_url": think_server.base_url})
    columns = ["sample_id", "rollout_idx", "reasoning", "reasoning_closed", "completion", "score"]
    columns += ["truncated", "finish_reason", "prompt_tokens", "completion_tokens"]
    columns += ["token_count_source", "seed", "error", "extracted", "confidence_low_at"]
    assert offline.select(columns).equals(served.select(columns))
    assert offline.select(columns[:-1]).equals(plain.select(columns[:-1]))
    assert set(offline["token_count_source"]) == {"exact"}
    # Every rollout's prompt is the whole prompt, as the engine tokenised it.
    assert offline["prompt_tokens"].n_unique() > 1 and offline["prompt_tokens"].min() > 10
    for name in (*SUMMARY_COLUMNS, "token_logprobs"):
        a = offline[name].explode().to_numpy()
        b = served[name].explode().to_numpy()
        assert a.shape == b.shape and abs(a - b).max() < LOGPROB_TOLERANCE, name
    # The stored summaries are those of the stored arrays; one array per token.
    for row in offline.iter_rows(named=True):
        assert len(row["token_logprobs"]) == row["completion_tokens"]
        assert all(len(step) == CONFIDENCE["logprobs"] for step in row["top_logprobs"])
        again = trace_summary(
            row["token_logprobs"], row["top_logprobs"], CONFIDENCE["confidence_window"]
        )
        for name in SUMMARY_COLUMNS:
            assert row[name] == pytest.approx(again[name], rel=1e-12), name
    # The reasoning is apart from the answer, without its tags. (The parser splits at the
    # first </think>: a model that closes its thought twice keeps the rest in the answer.)
    assert offline["reasoning"].null_count() == 0
    assert not offline["reasoning"].str.contains("think>").any()
    assert not offline["completion"].drop_nulls().str.starts_with("<think>").any()
    # Some thoughts are cut by max_tokens, some are not; scores are mixed.
    truncated = int(offline["truncated"].sum())
    assert 0 < truncated < offline.height
    assert offline.filter(pl.col("truncated"))["reasoning_closed"].not_().any()
    scores = offline["score"].drop_nulls()
    assert 0 < scores.sum() < scores.len()
