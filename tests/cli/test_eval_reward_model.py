"""`curate eval --grader reward-model` end to end (fake backend, fake reward server on
loopback): scores and raw_score stored, the manifest's record, and one-line errors
(exit 2, nothing written) for bad --reward-* options."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from curate.store.run_dir import RolloutStore
from tests.conftest import ARITHMETIC, Result
from tests.graders.reward_server import FakeRewardServer

KEY = "sk-reward-cli-KEY-1234abcd"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRewardServer]:
    with FakeRewardServer(api_key=KEY) as srv:
        yield srv


def _eval(out: Path, *extra: object) -> list[object]:
    return [
        "eval", ARITHMETIC, "--model", "fake-model", "--backend", "fake", "--limit", "5",
        "-n", "2", "--out", out, *extra,
    ]  # fmt: skip


def test_rewards_are_stored_with_their_raw_value(
    cli: Callable[..., Result], tmp_path: Path, server: FakeRewardServer
) -> None:
    out = tmp_path / "run"
    env = {"CURATE_TEST_RM_KEY": KEY}
    res = cli(
        *_eval(out, "--grader", "reward-model", "--reward-base-url", server.url),
        "--reward-api-key-env", "CURATE_TEST_RM_KEY", "--reward-model", "tiny-reward",
        env=env,
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    flat = " ".join(res.stderr.split())  # the line wraps at the terminal's width
    assert "grader 'reward-model': references not checked (the grader reads no reference)" in flat
    rollouts = RolloutStore(out).rollouts()
    assert rollouts.height == 10 and rollouts["error"].null_count() == 10
    for score, raw in zip(rollouts["score"], rollouts["raw_score"], strict=True):
        assert raw in (2.0, -2.0)
        assert score == pytest.approx(1 / (1 + math.exp(-raw)))
    # Each request carried the sample's chat prompt and the completion as the last turn.
    last = server.bodies[-1][1]
    assert last["model"] == "tiny-reward" and last["messages"][0]["role"] == "user"
    assert last["messages"][-1]["role"] == "assistant"
    manifest_text = (out / "manifest.json").read_text()
    manifest = json.loads(manifest_text)
    assert manifest["grader"] == "reward-model"
    assert manifest["reward_model"] == {
        "base_url": server.url,
        "model": "tiny-reward",
        "endpoint": "classify",
    }
    assert KEY not in manifest_text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--grader", "reward-model"), "--grader reward-model needs --reward-base-url URL"),
        (("--reward-model", "x"), "--reward-model needs --reward-base-url"),
        (
            ("--grader", "reward-model", "--reward-base-url", "localhost:8000"),
            "expected an http:// or https:// URL",
        ),
        (
            ("--grader", "reward-model", "--reward-base-url", "http://x",
             "--reward-endpoint", "rank"),
            "--reward-endpoint 'rank': expected one of auto, classify, pooling, score",
        ),
        (
            ("--grader", "numeric", "--reward-base-url", "http://127.0.0.1:1"),
            "the --reward-* options need --grader reward-model",
        ),
        (
            ("--grader", "reward-model", "--reward-base-url", "http://127.0.0.1:1",
             "--reward-api-key-env", "CURATE_NO_SUCH_VAR_42"),
            "--reward-api-key-env CURATE_NO_SUCH_VAR_42: the variable is not set or empty",
        ),
        (
            ("--grader", "reward-model", "--reward-base-url", "http://127.0.0.1:1"),
            "--reward-base-url http://127.0.0.1:1: cannot reach the reward model",
        ),
    ],
)  # fmt: skip
def test_bad_reward_options_are_one_line_exit_2_nothing_written(
    cli: Callable[..., Result], tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "run"
    res = cli(*_eval(out, *extra))
    assert res.exit_code == 2, (res.stdout, res.stderr)
    errors = [line for line in res.stderr.splitlines() if line.startswith("curate: ")]
    assert len(errors) == 1 and message in errors[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not (out / "rollouts").exists() or not any((out / "rollouts").iterdir())


def test_a_wrong_key_stops_before_generating(
    cli: Callable[..., Result], tmp_path: Path, server: FakeRewardServer
) -> None:
    out = tmp_path / "run"
    res = cli(
        *_eval(out, "--grader", "reward-model", "--reward-base-url", server.url),
        "--reward-api-key-env", "CURATE_TEST_RM_KEY",
        env={"CURATE_TEST_RM_KEY": "sk-not-the-key-0000"},
    )  # fmt: skip
    assert res.exit_code == 2
    assert "401" in res.stderr and "sk-not-the-key" not in res.stderr
    assert not (out / "rollouts").exists()


def test_grade_rescores_a_run_with_the_reward_model(
    cli: Callable[..., Result], tmp_path: Path, server: FakeRewardServer
) -> None:
    """`curate grade` takes the same --reward-* options: a numeric run re-scored by the
    reward model, then the two graders compared with `curate agree`."""
    first, second = tmp_path / "numeric", tmp_path / "rm"
    assert cli(*_eval(first)).exit_code == 0
    env = {"CURATE_TEST_RM_KEY": KEY}
    res = cli(
        "grade", first, "--grader", "reward-model", "--out", second,
        "--reward-base-url", server.url, "--reward-api-key-env", "CURATE_TEST_RM_KEY",
        env=env,
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    before, after = RolloutStore(first).rollouts(), RolloutStore(second).rollouts()
    assert before.height == after.height == 10
    assert after["raw_score"].null_count() == 0
    assert before["completion"].to_list() == after["completion"].to_list()
    agree = cli("agree", first, second, "--format", "json")
    assert agree.exit_code == 0, agree.stderr
    bad = cli("grade", first, "--grader", "numeric", "--out", tmp_path / "x", "--reward-model", "m")
    assert bad.exit_code == 2 and "--reward-model needs --reward-base-url" in bad.stderr
    assert not (tmp_path / "x").exists()
