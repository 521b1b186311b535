"""Dynamic-sampling settings: the binomial model, the recommendations, the report section."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import polars as pl
import pytest

from curate.trainers.settings import (
    ONE_ROUND_TARGET,
    STALL_TARGET,
    TRAINERS,
    binomial_below,
    expected_rounds,
    plan_dynamic_sampling,
    plan_lines,
    prompts_quantile,
    stall_risk,
)
from tests.conftest import invoke_curate


@pytest.mark.parametrize(("n", "p", "k"), [(10, 0.5, 5), (30, 0.2, 7), (7, 0.9, 7), (50, 0.01, 1)])
def test_binomial_below_is_the_exact_sum(n: int, p: float, k: int) -> None:
    exact = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k))
    assert binomial_below(n, p, k) == pytest.approx(exact, rel=1e-9)


def test_edges() -> None:
    assert binomial_below(10, 0.3, 0) == 0.0
    assert binomial_below(10, 0.3, 11) == 1.0
    assert binomial_below(10, 0.0, 1) == 1.0
    assert binomial_below(10, 1.0, 10) == 0.0
    assert stall_risk(0.3, 100, 50, 0) == 0.0  # no maximum: never stalls
    assert expected_rounds(0.0, 100, 50) is None


def simulate(p: float, gen: int, batch: int, max_rounds: int, trials: int, seed: int = 1):
    """A trainer's loop: draw rounds of `gen` groups, each mixed with probability p."""
    rng = random.Random(seed)
    stalls, rounds_total = 0, 0
    for _ in range(trials):
        kept, rounds = 0, 0
        while kept < batch and rounds < max_rounds:
            kept += sum(rng.random() < p for _ in range(gen))
            rounds += 1
        rounds_total += rounds
        stalls += kept < batch
    return stalls / trials, rounds_total / trials


def test_the_formulas_match_a_simulated_trainer() -> None:
    p, gen, batch, max_rounds = 0.3, 30, 21, 3
    risk, rounds = simulate(p, gen, batch, max_rounds, trials=4000)
    assert stall_risk(p, gen, batch, max_rounds) == pytest.approx(risk, abs=0.02)
    assert expected_rounds(p, gen, batch, max_rounds) == pytest.approx(rounds, abs=0.03)
    assert 0.05 < risk < 0.5  # the case is informative: neither certain nor impossible


def test_recommendation_is_the_smallest_that_meets_its_targets() -> None:
    p, batch = 0.337, 512
    plan = plan_dynamic_sampling(p, trainer="verl", train_batch_size=batch, group_size=8)
    gen, rounds = plan.gen_batch_size, plan.max_gen_batches
    assert gen is not None and rounds is not None
    # One round fills the batch with the target probability, and one prompt fewer would not.
    assert 1 - binomial_below(gen, p, batch) >= ONE_ROUND_TARGET
    assert 1 - binomial_below(gen - 1, p, batch) < ONE_ROUND_TARGET
    assert plan.stall_risk is not None and plan.stall_risk <= STALL_TARGET
    assert plan.expected_rounds is not None and 1.0 < plan.expected_rounds < 1.2
    assert plan.stall_risk_if_halved is not None and plan.stall_risk_if_halved > plan.stall_risk
    assert f"data.gen_batch_size={gen}" in plan.settings
    assert f"algorithm.filter_groups.max_num_gen_batches={rounds}" in plan.settings
    assert "actor_rollout_ref.rollout.n=8" in plan.settings


def test_given_settings_are_checked_not_replaced() -> None:
    plan = plan_dynamic_sampling(
        0.2,
        trainer="verl",
        train_batch_size=512,
        group_size=16,
        gen_batch_size=1536,
        max_gen_batches=3,
    )
    assert (plan.gen_batch_size, plan.max_gen_batches, plan.chosen) == (1536, 3, "given")
    # 3 rounds of 1536 at p=0.2 give 921.6 expected mixed groups: safe; at p=0.1, 460.8:
    # mostly short of 512.
    assert plan.stall_risk is not None and plan.stall_risk < 1e-6
    assert plan.stall_risk_if_halved is not None and plan.stall_risk_if_halved > 0.9


def test_nemo_rl_names_a_multiplier_and_openrlhf_replaces_prompts() -> None:
    nemo = plan_dynamic_sampling(0.5, trainer="nemo-rl", train_batch_size=100, group_size=8)
    assert nemo.gen_batch_size is not None
    assert f"grpo.batch_multiplier={nemo.gen_batch_size / 100:.4g}" in nemo.settings
    assert "grpo.use_dynamic_sampling=true" in nemo.settings
    openrlhf = plan_dynamic_sampling(0.25, trainer="openrlhf", train_batch_size=100, group_size=8)
    assert openrlhf.gen_batch_size is None and openrlhf.stall_risk is None
    assert openrlhf.expected_prompts_per_step == pytest.approx(400)
    assert openrlhf.prompts_per_step_p99 == prompts_quantile(0.25, 100, 0.99)
    assert "--algo.dynamic_filtering_enable" in openrlhf.settings
    head, lines = plan_lines(openrlhf)
    assert "OpenRLHF" in head and any("400 prompts" in line for line in lines)


def test_no_mixed_groups_says_so() -> None:
    plan = plan_dynamic_sampling(0.0, trainer="verl", train_batch_size=64, group_size=8)
    assert plan.settings == [] and plan.note is not None and "never fill" in plan.note


def test_every_trainer_names_its_source() -> None:
    for knobs in TRAINERS.values():
        assert knobs.source and knobs.title


# -- through `curate report` ------------------------------------------------------------


@pytest.fixture
def half_mixed(tmp_path: Path) -> Path:
    """40 samples x 8 rollouts: 20 mixed, 10 always right, 10 always wrong."""
    rows = []
    for i in range(40):
        for r in range(8):
            score = 1.0 if i < 10 else 0.0 if i < 20 else float(r % 2)
            rows.append({"sample_id": f"s{i:02d}", "rollout_idx": r, "score": score})
    path = tmp_path / "scores.csv"
    pl.DataFrame(rows).write_csv(path)
    return path


def test_report_prints_the_settings_in_every_format(half_mixed: Path) -> None:
    result = invoke_curate(
        "report", half_mixed, "--trainer", "verl", "--train-batch-size", "64", "-f", "json"
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)["trainer_settings"]
    # With 8 rollouts and groups of 8 the estimate is exact: half the groups are mixed.
    assert data["mixed_share"] == pytest.approx(0.5)
    expected = plan_dynamic_sampling(0.5, trainer="verl", train_batch_size=64, group_size=8)
    assert data["gen_batch_size"] == expected.gen_batch_size
    assert data["max_gen_batches"] == expected.max_gen_batches
    table = invoke_curate("report", half_mixed, "--train-batch-size", "64")
    assert table.exit_code == 0, table.stderr
    assert f"data.gen_batch_size={expected.gen_batch_size}" in table.stdout
    assert "trainer settings: verl (DAPO recipe)" in table.stdout
    md = invoke_curate(
        "report", half_mixed, "--trainer", "nemo-rl", "--train-batch-size", "64", "-f", "markdown"
    )
    assert md.exit_code == 0, md.stderr
    assert "**Trainer settings:** NeMo-RL" in md.stdout and "grpo.batch_multiplier=" in md.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trainer", "verl"], "needs --train-batch-size"),
        (["--gen-batch-size", "100"], "need --train-batch-size"),
        (["--train-batch-size", "64", "--gen-batch-size", "10"], "below --train-batch-size"),
        (["--trainer", "openrlhf", "--train-batch-size", "8", "--max-gen-batches", "3"], "no"),
        (["--trainer", "other", "--train-batch-size", "8"], "other"),
    ],
)
def test_bad_settings_options_are_one_line_and_exit_2(
    half_mixed: Path, args: list[str], message: str
) -> None:
    result = invoke_curate("report", half_mixed, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
