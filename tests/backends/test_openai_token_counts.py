"""Per-rollout token counts from an OpenAI-compatible endpoint (curate.backends.openai_api):
exact from what the answer says per choice, from the model's tokenizer when there is
one, else shares of the request's total marked as estimates; vLLM's `return_token_ids`
asked for only of an endpoint that showed the field, and log-probabilities parsed in
both wire forms."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from curate.backends.base import GenerationRequest, SamplingConfig
from curate.backends.openai_api import open_openai
from curate.remote.openai_wire import parse_body, request_body
from tests.backends.fault_proxy import FakeOpenAIServer
from tests.conftest import ROOT

SAMPLING = SamplingConfig(temperature=1.0, max_tokens=8)


def _requests(count: int, n: int, chat: bool = True) -> list[GenerationRequest]:
    out = []
    for i in range(count):
        text = f"What is {i} + {i + 1}?"
        prompt = [{"role": "user", "content": text}] if chat else text
        out.append(GenerationRequest(f"s{i}", prompt, n=n, first_run=0, seed=100 + i))
    return out


@pytest.fixture
def vllm_like() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(token_ids=True) as srv:
        yield srv


@pytest.mark.parametrize("mode", ["chat", "completion"])
def test_token_ids_are_asked_of_an_endpoint_that_shows_them(
    vllm_like: FakeOpenAIServer, mode: str
) -> None:
    reqs = _requests(5, n=4, chat=mode == "chat")
    with open_openai("fake-model", base_url=vllm_like.base_url, concurrency=2) as backend:
        out = backend.generate(reqs, SAMPLING, mode)  # type: ignore[arg-type]
    # The first answer showed the field without counts: asked again once, with it.
    asked = [b.get("return_token_ids") for b in vllm_like.bodies]
    assert asked == [None] + [True] * 5
    for gens in out:
        assert [g.token_count_source for g in gens] == ["exact"] * 4
        assert [g.completion_tokens for g in gens] == [len(g.text or "") for g in gens]


def test_an_endpoint_without_the_field_never_gets_it() -> None:
    with FakeOpenAIServer() as srv:
        with open_openai("fake-model", base_url=srv.base_url, concurrency=2) as backend:
            out = backend.generate(_requests(3, n=1), SAMPLING, "chat")
        assert all("return_token_ids" not in b for b in srv.bodies)
    # One choice per request: the request's usage is that rollout's, exactly.
    assert [g.token_count_source for gens in out for g in gens] == ["exact"] * 3


def test_the_tokenizer_counts_when_the_answer_does_not() -> None:
    """A local model directory's tokenizer counts each choice's text, reasoning tags
    put back, when the endpoint gives only a total for n choices."""
    pytest.importorskip("transformers")
    model = str(ROOT / "sample_data" / "tiny-math")
    with (
        FakeOpenAIServer(models=[model]) as srv,
        open_openai(model, base_url=srv.base_url, concurrency=2) as backend,
    ):
        out = backend.generate(_requests(2, n=3), SAMPLING, "chat")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    for gens in out:
        for g in gens:
            assert g.token_count_source == "tokenizer"
            assert g.completion_tokens == len(tok(g.text, add_special_tokens=False)["input_ids"])


def test_request_body_asks_for_logprobs_and_token_ids_in_each_form() -> None:
    chat = request_body("m", "q", "chat", max_tokens=8, temperature=1.0, top_logprobs=6)
    assert chat["logprobs"] is True and chat["top_logprobs"] == 6
    completion = request_body("m", "q", "completion", max_tokens=8, temperature=1.0, top_logprobs=6)
    assert completion["logprobs"] == 6 and "top_logprobs" not in completion
    plain = request_body("m", "q", "chat", max_tokens=8, temperature=1.0)
    assert "logprobs" not in plain and "extra_body" not in plain
    ids = request_body("m", "q", "chat", max_tokens=8, temperature=1.0, token_ids=True)
    assert ids["extra_body"] == {"return_token_ids": True}


def test_logprobs_are_parsed_in_the_chat_and_completions_forms() -> None:
    chat = {
        "choices": [
            {
                "message": {"content": "7"},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {
                            "token": "7",
                            "logprob": -0.1,
                            "top_logprobs": [
                                {"token": "7", "logprob": -0.1},
                                {"token": "8", "logprob": -2.5},
                            ],
                        }
                    ]
                },
                "token_ids": [55],
            }
        ],
        "prompt_token_ids": [1, 2, 3],
    }
    (c,), _, _ = parse_body(json.dumps(chat).encode(), "chat")
    assert c.token_logprobs == [-0.1] and c.top_logprobs == [[-0.1, -2.5]]
    assert c.token_ids == [55] and c.prompt_token_ids == [1, 2, 3] and c.knows_token_ids
    completion = {
        "choices": [
            {
                "text": "7",
                "finish_reason": "stop",
                "logprobs": {
                    "tokens": ["7"],
                    "token_logprobs": [-0.1],
                    "top_logprobs": [{"7": -0.1, "8": -2.5}],
                },
            }
        ]
    }
    (c,), _, _ = parse_body(json.dumps(completion).encode(), "completion")
    assert c.token_logprobs == [-0.1] and c.top_logprobs == [[-0.1, -2.5]]
    assert not c.knows_token_ids and c.token_ids is None
