"""The context check: the longest prompt plus max_tokens against the model's window,
refused with one line before anything is written (the local model's own config and
tokenizer; the endpoint side is tested against a real server in
tests/backends/test_context_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from curate.backends.context import local_window, lower_bound
from curate.evaluation.context import ContextCheck
from tests.conftest import ARITHMETIC, TINY_MODEL, invoke_curate


def _check(**fields: object) -> ContextCheck:
    base: dict[str, object] = {
        "window": 128,
        "window_source": "--max-model-len",
        "sample_id": "s1",
        "prompt_tokens": 30,
        "exact": True,
        "counted_by": "the model's tokenizer",
        "max_tokens": 256,
        "backend": "vllm",
    }
    return ContextCheck(**{**base, **fields})  # type: ignore[arg-type]


def test_refusal_names_the_options() -> None:
    assert _check(max_tokens=98).refusal() is None  # 30 + 98 = 128 fits exactly
    error = _check(config_window=512).refusal()
    assert error is not None
    text = str(error)
    assert "needs 286 tokens, over the model's 128 (--max-model-len)" in text
    assert "lower --max-tokens to 98 or less" in text
    assert "raise --max-model-len to 286 (the model allows 512)" in text
    assert "--no-context-check" in text and "\n" not in text


def test_a_prompt_longer_than_the_window() -> None:
    text = str(_check(prompt_tokens=200, exact=False, counted_by="1 per 8 characters").refusal())
    assert "at least 200 tokens by 1 per 8 characters" in text
    assert "shorten or drop that prompt" in text and "lower --max-tokens" not in text


def test_lower_bound_and_local_window(tmp_path: Path) -> None:
    assert lower_bound("x" * 17) == 2
    assert lower_bound([{"role": "user", "content": "x" * 16}]) == 2
    assert local_window(str(TINY_MODEL), None) == (512, "the model's max_position_embeddings")
    assert local_window(str(TINY_MODEL), 64) == (64, "--max-model-len")
    assert local_window(str(tmp_path), None) is None


@pytest.mark.skipif(not (TINY_MODEL / "tokenizer.json").is_file(), reason="no tiny model")
def test_cli_refuses_before_the_engine_starts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", ARITHMETIC, "--model", TINY_MODEL, "--out", out, "-n", "2", "--quiet"]
    res = invoke_curate(*args, "--max-model-len", "128", "--max-tokens", "256")
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("curate: error: context: the longest prompt (sample ")
    assert "--max-tokens 256" in line and "over the model's 128 (--max-model-len)" in line
    assert not out.exists()  # nothing written, no engine log
    # Over the model's own window, without --max-model-len.
    res = invoke_curate(*args, "--max-tokens", "600")
    assert res.exit_code == 2 and "(the model's max_position_embeddings)" in res.stderr
    assert not out.exists()


def test_unknown_reasoning_parser_before_anything_is_written(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    out = tmp_path / "run"
    res = invoke_curate(
        "eval", ARITHMETIC, "--model", TINY_MODEL, "--out", out, "--reasoning-parser", "nope"
    )
    assert res.exit_code == 2
    assert "--reasoning-parser: no parser 'nope' in vLLM" in res.stderr
    assert not out.exists()
