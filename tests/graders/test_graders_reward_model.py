"""`--grader reward-model` against a fake reward server on loopback: endpoint detection,
the wire format (chat messages or text, the raw output asked for, the key), sigmoid,
two-label and range normalisation, failures as error rows (never a 0), and ROC AUC."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from curate.errors import UsageError
from curate.graders import get_grader
from curate.graders.base import ScoreRange
from curate.graders.reward_model import (
    RewardModelConfig,
    RewardModelGrader,
    reward_of,
    score_reward,
    sigmoid,
)
from curate.remote import RetryPolicy
from curate.stats.auc import roc_auc
from tests.graders.reward_server import FakeRewardServer

KEY = "sk-reward-test-KEY-9a8b7c6d"
CHAT = [{"role": "user", "content": "What is 2 + 3?"}]
TEXT = "<s><|user|>What is 2 + 3?\n<|assistant|>"
QUICK = RetryPolicy(max_retries=2, backoff_base=0.01, backoff_max=0.02)


@pytest.fixture
def server() -> Iterator[FakeRewardServer]:
    with FakeRewardServer() as srv:
        yield srv


def grader_for(server: FakeRewardServer, **config: Any) -> RewardModelGrader:
    score_range = config.pop("score_range", None)
    grader = get_grader(
        "reward-model",
        reward_model=RewardModelConfig(server.url, **config),
        score_range=score_range,
    )
    assert isinstance(grader, RewardModelGrader)
    grader.policy = QUICK
    return grader


def grade(grader: RewardModelGrader, completions: list[str], prompt: object = CHAT) -> list[Any]:
    contexts = [{"prompt": prompt} for _ in completions]
    return grader.grade_batch(completions, ["5"] * len(completions), contexts=contexts)


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("served", "found"),
    [
        (("classify", "pooling", "score"), "classify"),
        (("pooling",), "pooling"),
        (("score",), "score"),
    ],
)
def test_the_first_endpoint_that_scores_a_probe_is_used(
    served: tuple[str, ...], found: str
) -> None:
    with FakeRewardServer(served) as srv:
        grader = grader_for(srv)
        assert grader.endpoint == found
        probes = len(srv.bodies)
        assert [endpoint for endpoint, _ in srv.bodies][-1] == found
        grade(grader, ["5"], TEXT)
        grade(grader, ["6"], TEXT)
        # Detected once: the two batches sent one request each, to that endpoint.
        assert [e for e, _ in srv.bodies[probes:]] == [found, found]
        assert grader.manifest_record() == {"base_url": srv.url, "model": None, "endpoint": found}


def test_a_given_endpoint_sends_no_probe(server: FakeRewardServer) -> None:
    grader = grader_for(server, endpoint="pooling")
    assert server.bodies == []
    [result] = grade(grader, ["5"])
    assert result.score == pytest.approx(sigmoid(2.0))
    assert server.bodies[0][0] == "pooling" and server.bodies[0][1]["task"] == "classify"


def test_a_server_without_classification_is_one_usage_error() -> None:
    with FakeRewardServer(()) as srv, pytest.raises(UsageError) as err:
        grader_for(srv)
    message = str(err.value)
    assert message.startswith(f"--reward-base-url {srv.url}: no classification endpoint")
    assert "/classify: 404" in message and "\n" not in message


def test_an_unreachable_server_is_one_usage_error() -> None:
    with FakeRewardServer() as srv:
        url = srv.url
    with pytest.raises(UsageError, match=r"^--reward-base-url .*: cannot reach the reward model"):
        get_grader("reward-model", reward_model=RewardModelConfig(url))


def test_a_trailing_v1_is_the_same_server(server: FakeRewardServer) -> None:
    grader = get_grader("reward-model", reward_model=RewardModelConfig(server.url + "/v1/"))
    assert isinstance(grader, RewardModelGrader) and grader.endpoint == "classify"


# --------------------------------------------------------------------------- wire format


def test_chat_prompts_go_as_messages_with_the_completion_last(server: FakeRewardServer) -> None:
    grader = grader_for(server, endpoint="classify", model="tiny-reward")
    results = grade(grader, ["5", "6"])
    assert [r.raw_score for r in results] == [2.0, -2.0]
    # The requests run concurrently: the server sees them in either order.
    sent = sorted(server.bodies, key=lambda item: item[1]["messages"][-1]["content"])
    for (endpoint, body), completion in zip(sent, ["5", "6"], strict=True):
        assert endpoint == "classify"
        assert body == {
            "use_activation": False,  # the raw logit; curate applies the sigmoid itself
            "model": "tiny-reward",
            "messages": [*CHAT, {"role": "assistant", "content": completion}],
        }


def test_text_prompts_go_as_prompt_plus_completion(server: FakeRewardServer) -> None:
    grader = grader_for(server, endpoint="classify")
    grade(grader, ["5"], TEXT)
    assert server.bodies[0][1] == {"use_activation": False, "input": TEXT + "5"}
    grader = grader_for(server, endpoint="score")
    grade(grader, ["5"], TEXT)
    assert server.bodies[1][1] == {"use_activation": False, "queries": TEXT, "documents": "5"}


def test_score_endpoint_with_chat_prompts_is_an_error_row(server: FakeRewardServer) -> None:
    [result] = grade(grader_for(server, endpoint="score"), ["5"])
    assert result.score is None and "takes text pairs, not chat messages" in result.error


def test_the_key_is_sent_and_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CURATE_TEST_RM_KEY", KEY)
    with FakeRewardServer(api_key=KEY) as srv:
        grader = grader_for(srv, api_key_env="CURATE_TEST_RM_KEY")
        assert srv.auth[0] == f"Bearer {KEY}"
        assert KEY not in repr(grader) and KEY not in str(grader.manifest_record())
        srv.statuses["7"] = [503] * 5
        [bad] = grade(grader, ["7"])
        assert bad.error is not None and KEY not in bad.error
    with FakeRewardServer(api_key=KEY) as srv:
        monkeypatch.setenv("CURATE_TEST_RM_KEY", "sk-wrong-key-000000")
        with pytest.raises(UsageError) as err:
            grader_for(srv, api_key_env="CURATE_TEST_RM_KEY")
        assert "401" in str(err.value) and "sk-wrong" not in str(err.value)


def test_an_unset_key_variable_is_a_usage_error(server: FakeRewardServer) -> None:
    with pytest.raises(UsageError, match="--reward-api-key-env CURATE_NO_SUCH_VAR_42"):
        grader_for(server, api_key_env="CURATE_NO_SUCH_VAR_42")


# --------------------------------------------------------------------------- values


def test_sigmoid_and_raw_score(server: FakeRewardServer) -> None:
    right, wrong = grade(grader_for(server), ["5", "4"])
    assert (right.score, right.raw_score) == (pytest.approx(1 / (1 + math.exp(-2))), 2.0)
    assert (wrong.score, wrong.raw_score) == (pytest.approx(1 / (1 + math.exp(2))), -2.0)
    assert right.extracted is None


def test_score_range_maps_linearly_and_refuses_values_outside(server: FakeRewardServer) -> None:
    right, wrong = grade(grader_for(server, score_range=(-4.0, 4.0)), ["5", "4"])
    assert (right.score, right.raw_score) == (0.75, 2.0)
    assert (wrong.score, wrong.raw_score) == (0.25, -2.0)
    outside = grade(grader_for(server, score_range=(0.0, 4.0)), ["4"])[0]
    assert outside.score is None and "outside score_range [0, 4]" in outside.error


def test_two_labels_give_the_probability_of_the_right_label() -> None:
    with FakeRewardServer(labels=2) as srv:
        right, wrong = grade(grader_for(srv), ["5", "4"])
    # Logits (wrong, right) = (-1, 1): softmax probability of "right" = sigmoid(2).
    assert right.score == pytest.approx(math.exp(1) / (math.exp(1) + math.exp(-1)))
    assert right.raw_score == 2.0 and wrong.raw_score == -2.0
    with FakeRewardServer(labels=3) as srv, pytest.raises(UsageError, match="3 values"):
        grader_for(srv)


def test_pure_normalisation() -> None:
    assert sigmoid(0.0) == 0.5 and sigmoid(-800.0) == 0.0 and sigmoid(800.0) == 1.0
    assert reward_of([1.5]) == 1.5 and reward_of([0.25, 1.0]) == 0.75
    assert score_reward(-800.0, None).score == 0.0  # no overflow
    assert score_reward(3.0, ScoreRange(-5.0, 5.0)).score == pytest.approx(0.8)


# --------------------------------------------------------------------------- failures


def test_failures_are_that_rollouts_error_row_never_a_zero(server: FakeRewardServer) -> None:
    grader = grader_for(server, endpoint="classify")
    server.statuses["6"] = [503, 429]  # transient: retried, then scored
    server.statuses["7"] = [500] * 10  # never clears: an error row after the retries
    server.reject.add("8")  # a refusal: at once, no retry
    server.malformed.add("9")  # an unreadable answer: retried, then an error row
    results = grade(grader, ["5", "6", "7", "8", "9"])
    assert [r.score is not None for r in results] == [True, True, False, False, False]
    assert results[1].raw_score == -2.0
    assert results[2].error == "reward model: 500 injected 500 (after 3 attempts)"
    assert results[3].error == (
        "reward model refused the request: 400 This model's maximum context length is 256"
    )
    assert results[4].error.startswith("reward model: malformed response")
    sent = [body["messages"][-1]["content"] for _, body in server.bodies]
    assert sent.count("8") == 1 and sent.count("7") == 3 and sent.count("6") == 3
    assert grader.stats.retries["server_error"] == 3 and grader.stats.retries["rate_limit"] == 1


def test_a_rollout_without_a_prompt_is_an_error_row(server: FakeRewardServer) -> None:
    grader = grader_for(server)
    results = grader.grade_batch(["5", "5"], ["5", "5"], contexts=[{"prompt": CHAT}, {}])
    assert results[0].score is not None
    assert results[1].error == "reward model: no prompt for this rollout"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"base_url": "127.0.0.1:8000"}, "expected an http:// or https:// URL"),
        ({"base_url": "http://x", "endpoint": "rank"}, "--reward-endpoint 'rank'"),
        ({"base_url": "http://x", "concurrency": 0}, "--reward-concurrency"),
    ],
)
def test_bad_config_is_a_usage_error(config: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        RewardModelConfig(**config)


def test_registry_wiring() -> None:
    with pytest.raises(UsageError, match="needs --reward-base-url"):
        get_grader("reward-model")
    with pytest.raises(UsageError, match="need --grader reward-model"):
        get_grader("numeric", reward_model=RewardModelConfig("http://127.0.0.1:1"))
    with pytest.raises(UsageError, match="takes no argument"):
        get_grader("reward-model:x", reward_model=RewardModelConfig("http://127.0.0.1:1"))


# --------------------------------------------------------------------------- AUC


def test_roc_auc_by_hand() -> None:
    # Positives 0.9, 0.4; negatives 0.5, 0.1: pairs (0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1) = 3/4.
    assert roc_auc([0.9, 0.5, 0.4, 0.1], [1, 0, 1, 0]) == 0.75
    assert roc_auc([0.3, 0.3], [1, 0]) == 0.5  # a tie counts half
    assert roc_auc([1.0, 2.0, 3.0], [0, 0, 1]) == 1.0
    assert roc_auc([1.0, 2.0, 3.0], [1, 0, 0]) == 0.0
    assert math.isnan(roc_auc([1.0, 2.0], [1, 1]))
    with pytest.raises(ValueError):
        roc_auc([1.0], [1, 0])


def test_roc_auc_matches_sklearn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    import random

    rng = random.Random(3)
    labels = [rng.random() < 0.4 for _ in range(500)]
    scores = [round(rng.gauss(1.0 if y else 0.0, 1.0), 1) for y in labels]  # with ties
    assert roc_auc(scores, labels) == pytest.approx(metrics.roc_auc_score(labels, scores))
