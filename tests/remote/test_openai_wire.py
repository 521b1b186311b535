"""The OpenAI-compatible wire format shared by the backend and the judge: request
bodies carry only what is needed, in either mode."""

from __future__ import annotations

import pytest

pytest.importorskip("openai")

from curate.remote.openai_wire import as_text, request_body

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1 + 1?"}]


@pytest.mark.parametrize("prompt", ["1 + 1?", CHAT])
def test_minimal_bodies_in_both_modes(prompt: object) -> None:
    chat = request_body("m", prompt, "chat", max_tokens=8, temperature=0.0)  # type: ignore[arg-type]
    assert set(chat) == {"model", "temperature", "max_tokens", "messages"}
    assert chat["messages"] == (CHAT if isinstance(prompt, list) else [
        {"role": "user", "content": prompt}
    ])  # fmt: skip
    completion = request_body("m", prompt, "completion", max_tokens=8, temperature=0.0)  # type: ignore[arg-type]
    assert set(completion) == {"model", "temperature", "max_tokens", "prompt"}
    assert completion["prompt"] == (as_text(CHAT) if isinstance(prompt, list) else prompt)


def test_sampling_fields_only_when_they_differ_from_every_endpoints_default() -> None:
    body = request_body(
        "m", "q", "chat", max_tokens=8, temperature=1.0, top_p=0.9, n=4, seed=7, stop=("\n",),
        max_tokens_key="max_completion_tokens",
    )  # fmt: skip
    assert body["n"] == 4 and body["seed"] == 7 and body["stop"] == ["\n"]
    assert body["top_p"] == 0.9 and body["max_completion_tokens"] == 8
    assert "max_tokens" not in body
    one = request_body("m", "q", "chat", max_tokens=8, temperature=1.0, n=1, seed=None)
    assert not {"n", "seed", "stop", "top_p"} & set(one)
