"""`curate compare` on real runs: the bundled tiny-math model on the CPU build of vLLM,
the same 40 prompts at two sampling temperatures (0.3 and 1.2), 8 rollouts each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from curate.backends.base import SamplingConfig
from tests.conftest import ARITHMETIC, chat_prompts_and_references, run_chat_eval

pytestmark = pytest.mark.slow

PROMPTS = 40
RUNS = 8


@pytest.fixture(scope="module")
def temperature_runs(vllm_backend: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    prompts, refs = chat_prompts_and_references(ARITHMETIC, PROMPTS)
    root = tmp_path_factory.mktemp("temperatures")
    out = []
    for temperature in (0.3, 1.2):
        run = root / f"t{temperature}"
        sampling = SamplingConfig(temperature=temperature, max_tokens=16)
        result, _ = run_chat_eval(vllm_backend, run, prompts, refs, runs=RUNS, sampling=sampling)
        assert result.rollouts == PROMPTS * RUNS and result.errors == 0
        out.append(run)
    return out


def test_two_temperatures_give_a_transition_table(cli, temperature_runs: list[Path]) -> None:
    cold, hot = temperature_runs
    result = cli("compare", cold, hot, "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["samples_compared"] == PROMPTS and data["samples_left_out"] == 0
    assert (data["before"], data["after"]) == ("t0.3", "t1.2")
    counts = {(t["before"], t["after"]): t["count"] for t in data["transitions"]}
    assert sum(counts.values()) == PROMPTS
    cold_run, hot_run = data["runs"]
    # Hotter sampling spreads the outcomes: fewer samples are all-same.
    all_same = [r["categories"]["always_correct"] + r["categories"]["always_incorrect"]
                for r in data["runs"]]  # fmt: skip
    assert all_same[1] < all_same[0], all_same
    assert hot_run["high_variance_fraction"] > cold_run["high_variance_fraction"]
    # Every transition into mixed is counted in the table and, from always incorrect,
    # in the newly learnable set.
    assert data["sets"]["newly_learnable"]["count"] == counts[("always_incorrect", "mixed")]
    assert (
        data["sets"]["still_unreachable"]["count"]
        == counts[("always_incorrect", "always_incorrect")]
    )
    table = cli("compare", cold, hot)
    assert table.exit_code == 0 and "outcome transitions: t0.3 (rows) -> t1.2" in table.stdout
    print(table.stdout)  # the real table, for `pytest -s`
