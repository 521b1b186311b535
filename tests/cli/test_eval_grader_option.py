"""`curate eval -O KIND.NAME=VALUE`: the generic escape hatch reaches a grader kind's own
options (its schema: curate.graders.registry), as its dedicated flags do; a mistake is
one line naming the option and the ones that exist (exit 2, nothing written)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from curate.store.run_dir import RolloutStore
from tests.conftest import ARITHMETIC, Result
from tests.graders.reward_server import FakeRewardServer


@pytest.fixture(scope="module")
def server() -> Iterator[FakeRewardServer]:
    with FakeRewardServer() as srv:
        yield srv


def _eval(out: Path, *extra: object) -> list[object]:
    return [
        "eval", ARITHMETIC, "--model", "fake-model", "--backend", "fake", "--limit", "4",
        "-n", "2", "--out", out, *extra,
    ]  # fmt: skip


def test_options_given_with_o_equal_their_flags(
    cli: Callable[..., Result], tmp_path: Path, server: FakeRewardServer
) -> None:
    """The same reward-model settings given as flags and as -O pairs make the same run:
    the same manifest record and the same scores."""
    by_flags, by_o = tmp_path / "flags", tmp_path / "o"
    res = cli(
        *_eval(by_flags, "--grader", "reward-model", "--reward-base-url", server.url),
        "--reward-model", "tiny-reward", "--reward-endpoint", "pooling",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    res = cli(
        *_eval(by_o, "--grader", "reward-model", "-O", f"reward-model.base_url={server.url}"),
        "-O", "reward-model.model=tiny-reward", "-O", "reward-model.endpoint=pooling",
        # A backend option beside them still reaches the backend.
        "-O", "delay_s=0",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    records = [json.loads((run / "manifest.json").read_text()) for run in (by_flags, by_o)]
    assert records[0]["reward_model"] == records[1]["reward_model"]
    assert records[1]["reward_model"]["endpoint"] == "pooling"
    scores = [
        RolloutStore(run).rollouts().sort("sample_id", "rollout_idx")["score"]
        for run in (by_flags, by_o)
    ]
    assert scores[0].to_list() == scores[1].to_list()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ("--grader", "judge", "-O", "judge.model=m", "-O", "judge.temprature=0"),
            "--option judge.temprature: not an option of --grader judge (choose from "
            "judge.model, judge.base_url",
        ),
        (
            ("--grader", "judge", "--judge-model", "m", "-O", "judge.model=n"),
            "--judge-model and --option judge.model both set it: give one",
        ),
        (
            ("--grader", "judge", "-O", "judge.model=m", "-O", "judge.concurrency=0"),
            "--judge-concurrency must be at least 1, not 0",
        ),
        (
            ("--grader", "numeric", "-O", "judge.model=m"),
            "the judge options (--judge-model, ...) apply to --grader judge, not 'numeric'",
        ),
        (("-O", "jduge.model=m"), "unknown grader 'jduge' (did you mean 'judge'?)"),
        (("-O", "exact.x=1"), "--option exact.x: --grader exact takes no options of its own"),
        (("--grader", "judge", "-O", "judge.timeout=30"), "--grader judge needs --judge-model"),
    ],
)
def test_a_bad_grader_option_is_one_line_exit_2_nothing_written(
    cli: Callable[..., Result], tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "run"
    res = cli(*_eval(out, *extra))
    assert res.exit_code == 2, (res.stdout, res.stderr)
    errors = [line for line in res.stderr.splitlines() if line.startswith("curate: ")]
    assert len(errors) == 1 and message in errors[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not out.exists()
