"""Where separated reasoning comes from: an OpenAI-compatible server's reasoning field
(chat and completions), and vLLM's own reasoning parser run on offline output."""

from __future__ import annotations

import json

import pytest

from curate.errors import UsageError
from curate.remote.openai_wire import parse_body


def _body(choice: dict[str, object]) -> bytes:
    return json.dumps({"choices": [choice], "usage": {"prompt_tokens": 3}}).encode()


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_chat_reasoning_field(field: str) -> None:
    body = _body({"message": {"content": "4", field: "two and two"}, "finish_reason": "stop"})
    (choice,), _, _ = parse_body(body, "chat")
    assert (choice.text, choice.reasoning) == ("4", "two and two")


def test_completions_reasoning_field_and_none_without_one() -> None:
    (choice,), _, _ = parse_body(_body({"text": "4", "reasoning": "r"}), "completion")
    assert choice.reasoning == "r"
    (choice,), _, _ = parse_body(_body({"message": {"content": "<think>r</think>4"}}), "chat")
    assert choice.reasoning is None and choice.text == "<think>r</think>4"


class _Tokenizer:
    """Just what a think-tag parser reads of a tokenizer: its vocabulary."""

    def get_vocab(self) -> dict[str, int]:
        return {"<think>": 1, "</think>": 2, "4": 3}


def test_vllm_reasoning_parser_on_offline_output() -> None:
    pytest.importorskip("vllm")
    from curate.backends.vllm_local import parsed, reasoning_parser

    parser = reasoning_parser("deepseek_r1", _Tokenizer())
    gen = parsed(parser, "<think>two and two</think>4", "stop")
    assert (gen.text, gen.reasoning, gen.reasoning_closed) == ("4", "two and two", True)
    gen = parsed(parser, "<think>two and", "length")
    assert (gen.text, gen.reasoning, gen.reasoning_closed) == (None, "two and", False)
    # Stopped right after </think>: the parser gives no content, but the block ended.
    gen = parsed(parser, "<think>r</think>", "stop")
    assert (gen.reasoning, gen.reasoning_closed) == ("r", True)


def test_unknown_reasoning_parser_is_one_line() -> None:
    pytest.importorskip("vllm")
    from curate.backends.vllm_local import reasoning_parser_class

    with pytest.raises(
        UsageError, match=r"--reasoning-parser: no parser 'nope' in vLLM \(known: .*deepseek_r1"
    ):
        reasoning_parser_class("nope")
