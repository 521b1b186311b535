"""What an endpoint accepts, learned once: the probe plan for a refused request and
what an answer teaches (the whole backend against a fake server is in
test_openai_unit.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("openai")

from curate.backends.openai_probe import Capabilities, refused_alone
from curate.remote import Rejected, Retryable
from curate.remote.openai_wire import Choice


def choices(k: int) -> list[Choice]:
    return [
        Choice(index=i, text=str(i), finish_reason="stop", completion_tokens=1) for i in range(k)
    ]


@pytest.mark.parametrize(
    ("n", "seed", "plan"),
    [
        (4, 7, [(4, None), (1, 7), (1, None)]),  # drop the seed first, then n, then both
        (4, None, [(1, None)]),
        (1, 7, [(1, None)]),
        (1, None, []),  # nothing to blame but the request itself
    ],
)
def test_probe_plan_while_nothing_is_known(n: int, seed: int | None, plan: list[object]) -> None:
    assert Capabilities().variants(n, seed) == plan


def test_known_capabilities_leave_nothing_to_probe() -> None:
    caps = Capabilities(n_supported=True, seed_supported=False)
    assert caps.variants(4, 7) == []
    assert caps.refuses(1, 7) and not caps.refuses(4, None)
    assert caps.seed_to_send(7) is None


def test_answers_teach_n_and_seed() -> None:
    caps = Capabilities()
    assert caps.learn_from_answer(choices(4), 4, 7) == choices(4)
    assert caps.n_supported is True and caps.seed_supported is True and caps.accepted
    ignores = Capabilities()
    assert len(ignores.learn_from_answer(choices(1), 4, None)) == 1
    assert ignores.n_supported is False  # n ignored: one request per rollout from now
    with pytest.raises(Retryable, match="1 of 4 choices"):
        Capabilities(n_supported=True).learn_from_answer(choices(1), 4, None)


def test_max_completion_tokens_is_learned_from_the_refusal_in_chat_only() -> None:
    refusal = Rejected(400, "Unsupported parameter: 'max_tokens'; use 'max_completion_tokens'")
    caps = Capabilities()
    assert not caps.learn_limit_key(refusal, "completion")
    assert caps.learn_limit_key(refusal, "chat") and caps.max_tokens_key == "max_completion_tokens"
    assert not caps.learn_limit_key(refusal, "chat")  # learned once
    assert refused_alone(Rejected(413, "too long")) and not refused_alone(Rejected(401, "key"))
