"""Adaptive evaluation: the pure policy, label equivalence on replay, budget
accounting, and the round loop against the fake backend (resume included)."""

from __future__ import annotations

import json
import random
from functools import partial
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from curate.backends.fake import FakeBackend
from curate.cli.app import app
from curate.errors import RunError, UsageError
from curate.evaluation.adaptive import (
    AdaptivePolicy,
    SampleState,
    binomial_range_probability,
    outcome_label,
    replay,
    run_policy,
    state_from_store,
    target_count,
)
from curate.evaluation.evaluate import evaluate
from curate.evaluation.runner import plan_requests
from curate.stats.estimators import BetaPrior
from curate.store.run_dir import RolloutStore
from tests.evaluation.conftest import fake_answers, fake_options


def S(*scores: float) -> SampleState:
    return SampleState.of(scores)


# -- the policy ---------------------------------------------------------------
def test_state_counts_and_mixed() -> None:
    st = S(0, 0, 1)
    assert (st.n, st.successes, st.failures, st.mixed) == (3, 1, 2, True)
    assert not S(1, 1).mixed and not S(0.5, 0.5).mixed and S(0.5, 0.25).mixed
    assert not S().mixed and not S(1).mixed


def test_needs_and_wanted_plain() -> None:
    pol = AdaptivePolicy(round_size=1, max_runs=6)
    assert pol.needs(S()) == (1, 1) and pol.wanted(S()) == 2  # two draws before it can open
    assert pol.needs(S(0, 0)) == (1, 0) and pol.wanted(S(0, 0)) == 1
    assert pol.needs(S(1, 1)) == (0, 1)
    assert pol.settled(S(0, 1)) and pol.wanted(S(0, 1)) == 0
    assert pol.wanted(S(*[0] * 6)) == 0  # at the cap
    wide = AdaptivePolicy(round_size=4, max_runs=6)
    assert wide.wanted(S(0, 0, 0)) == 3  # never past the cap
    assert wide.wanted(S()) == 4


def test_needs_balanced() -> None:
    pol = AdaptivePolicy(round_size=1, max_runs=8, balanced=2)
    assert pol.needs(S(1, 0)) == (1, 1) and not pol.settled(S(1, 0))
    assert pol.wanted(S(1, 0)) == 2
    assert pol.settled(S(1, 0, 1, 0))
    # Mixed, but 3 passes + 3 failures cannot fit in the 1 draw left: stop.
    three = AdaptivePolicy(round_size=1, max_runs=6, balanced=3)
    assert three.wanted(S(1, 1, 1, 1, 0)) == 0
    # All the same: keep drawing to the cap even though balance is out of reach.
    assert pol.wanted(S(*[0] * 7)) == 1


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"round_size": 0}, "--round-size"),
        ({"max_runs": 0}, "--max-rollouts"),
        ({"budget": 0}, "--budget"),
        ({"balanced": 0}, "--balanced"),
        ({"balanced": 3, "max_runs": 5}, "cannot hold 3 passes"),
        ({"max_runs": None}, "--max-rollouts or --budget"),
    ],
)
def test_policy_rejects_bad_parameters(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        AdaptivePolicy(**kwargs)  # type: ignore[arg-type]


def test_binomial_range_probability() -> None:
    p = 0.3
    assert binomial_range_probability(4, p, 1, 1) == pytest.approx(1 - 0.7**4 - 0.3**4)
    assert binomial_range_probability(3, p, 1, 0) == pytest.approx(1 - 0.7**3)
    assert binomial_range_probability(3, p, 2, 2) == 0.0
    assert binomial_range_probability(3, p, 0, 0) == 1.0


def test_next_round_without_budget_asks_every_open_sample() -> None:
    pol = AdaptivePolicy(round_size=2, max_runs=4)
    states = {"new": S(), "wrong": S(0, 0), "mixed": S(0, 1), "capped": S(1, 1, 1, 1)}
    assert pol.next_round(states) == {"new": 2, "wrong": 2}


def test_budget_goes_to_the_best_chance_of_opening() -> None:
    # Hard-skewed prior: a sample that always passed is likelier to fail next than
    # one that always failed is to pass.
    prior = BetaPrior(0.5, 4.5)
    pol = AdaptivePolicy(round_size=1, max_runs=None, budget=20)
    states = {"right": S(1, 1, 1, 1), "wrong": S(0, 0, 0, 0)}
    assert pol.next_round(states, spent=19, prior=prior) == {"right": 1}
    # One rollout left: an untouched sample (needs two) cannot use it, the other can.
    states = {"new": S(), "wrong": S(0, 0)}
    assert pol.next_round(states, spent=19, prior=prior) == {"wrong": 1}
    assert pol.next_round(states, spent=20, prior=prior) == {}
    # Enough for everyone: everyone draws.
    assert pol.next_round(states, spent=0, prior=prior) == {"new": 2, "wrong": 1}


def test_rationing_spends_exactly_what_is_left() -> None:
    rng = random.Random(3)
    states = {f"s{i}": S(*([rng.choice([0.0, 1.0])] * rng.randint(1, 5))) for i in range(50)} | {
        f"n{i}": S() for i in range(10)
    }
    pol = AdaptivePolicy(round_size=3, max_runs=None, budget=1000)
    plan = pol.next_round(states, spent=1000 - 37)
    assert sum(plan.values()) == 37
    assert all(1 <= k <= 3 for k in plan.values())
    assert all(plan.get(f"n{i}", 2) >= 2 for i in range(10))  # never one draw for a new one


# -- replay: the same labels as a fixed-N run ---------------------------------
def _population(
    rng: random.Random, size: int, n: int, partial: bool = False
) -> dict[str, list[float]]:
    out = {}
    for i in range(size):
        p = rng.choice([0.0, 1.0, rng.betavariate(0.4, 2.0), rng.random()])
        seq = [1.0 if rng.random() < p else 0.0 for _ in range(n)]
        if partial and i % 5 == 0:
            seq = [rng.choice([0.5, 0.5, 0.25]) for _ in range(n)]
        out[f"s{i:03d}"] = seq
    return out


@pytest.mark.parametrize("round_size", [1, 2, 3, 5])
@pytest.mark.parametrize(
    ("balanced", "n"),
    [(None, 1), (None, 2), (None, 4), (None, 8), (None, 13), (1, 2), (1, 8), (2, 4), (2, 13)],
)
def test_replay_gives_fixed_n_labels(round_size: int, balanced: int | None, n: int) -> None:
    rng = random.Random(1000 * n + 10 * round_size + (balanced or 0))
    seqs = _population(rng, 200, n, partial=True)
    pol = AdaptivePolicy(round_size=round_size, max_runs=n, balanced=balanced)
    trace = replay(pol, seqs)
    for sid, seq in seqs.items():
        got = trace.outcomes[sid]
        assert got == seq[: len(got)]  # a prefix, in run order
        assert outcome_label(got) == outcome_label(seq), (sid, seq, got)
    assert trace.rollouts <= sum(len(s) for s in seqs.values())


def test_replay_saves_on_mixed_samples() -> None:
    seqs = {"mixed": [0.0, 1.0, 1.0, 0.0] * 2, "wrong": [0.0] * 8, "right": [1.0] * 8}
    trace = replay(AdaptivePolicy(round_size=1, max_runs=8), seqs)
    assert {k: len(v) for k, v in trace.outcomes.items()} == {"mixed": 2, "wrong": 8, "right": 8}


# -- budget accounting ----------------------------------------------------------
@pytest.mark.parametrize("budget", [1, 2, 7, 50, 333])
@pytest.mark.parametrize("round_size", [1, 2, 4])
def test_simulated_run_never_exceeds_budget(budget: int, round_size: int) -> None:
    rng = random.Random(budget * 7 + round_size)
    rates = {f"s{i}": rng.betavariate(0.3, 3.0) for i in range(40)}
    pol = AdaptivePolicy(round_size=round_size, max_runs=None, budget=budget)
    trace = run_policy(
        pol, rates, lambda sid, k: [float(rng.random() < rates[sid]) for _ in range(k)]
    )
    assert trace.rollouts <= budget
    # It stops only when the budget is spent or nothing useful fits in what is left.
    left = budget - trace.rollouts
    states = {sid: SampleState.of(v) for sid, v in trace.outcomes.items()}
    assert left == 0 or not pol.next_round(states, spent=trace.rollouts)


# -- the store: state, targets, plan_requests with per-sample targets ------------
def test_plan_requests_per_sample_targets() -> None:
    prompts = {"a": "pa", "b": "pb", "c": "pc"}
    done = {("a", 0), ("a", 1), ("b", 0)}
    reqs = plan_requests(prompts, {"a": 4, "b": 1}, done, base_seed=0)
    assert [(r.sample_id, r.first_run, r.n) for r in reqs] == [("a", 2, 2)]


def test_state_from_store_and_targets_fill_holes_first() -> None:
    frame = pl.DataFrame(
        {
            "sample_id": ["a", "a", "a", "a", "b", "b"],
            "rollout_idx": [0, 1, 2, 3, 0, 1],
            "score": [0.0, None, 0.0, 1.0, 1.0, 1.0],
            "error": [None, "HTTP 503", None, None, None, None],
        }
    )
    got = state_from_store(frame, ["a", "b", "c"])
    assert got.states["a"] == S(0, 0, 1) and got.states["b"] == S(1, 1)
    assert got.states["c"] == S() and got.spent == 6
    assert got.holes == {"a": [1]}
    assert target_count(got, "a", 1) == 2  # retry run 1 first
    assert target_count(got, "a", 3) == 6
    assert target_count(got, "b", 2) == 4 and target_count(got, "c", 2) == 2


# -- the loop against the fake backend ----------------------------------------
_opts = partial(fake_options, runs=6, chunk_size=3, adaptive=True, round_size=1)


def _counts(run: Path) -> dict[str, tuple[int, int]]:
    frame = RolloutStore(run).rollouts().filter(pl.col("error").is_null())
    agg = frame.group_by("sample_id").agg(pl.len(), (pl.col("score") >= 1).sum())
    return {sid: (int(n), int(c)) for sid, n, c in agg.iter_rows()}


def test_adaptive_eval_stops_mixed_samples_and_caps_the_rest(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    outcome = evaluate(_opts(arithmetic_jsonl, run))
    counts = _counts(run)
    assert len(counts) == 12
    for n, c in counts.values():
        assert n <= 6
        assert (0 < c < n) or n == 6  # mixed, or all the same at the cap
        if 0 < c < n:  # stopped at the first draw that mixed it
            assert n >= 2
    rates = {f"q{i:02d}": (0.0, 1.0, 0.5)[i % 3] for i in range(12)}
    assert all(counts[s][0] == 6 for s, r in rates.items() if r in (0.0, 1.0))
    r = outcome.result
    assert r.rollouts == sum(n for n, _ in counts.values()) < 12 * 6
    manifest = RolloutStore(run).read_manifest()
    assert manifest["adaptive"] is True
    assert manifest["adaptive_policy"] == {
        "round_size": 1,
        "max_runs": 6,
        "budget": None,
        "balanced": None,
    }
    assert manifest["adaptive_summary"]["rollouts"] == r.rollouts
    # Run again: nothing left to do.
    again = evaluate(_opts(arithmetic_jsonl, run))
    assert again.result.rollouts == 0 and again.result.skipped == r.rollouts


def test_adaptive_budget_is_never_exceeded(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    outcome = evaluate(_opts(arithmetic_jsonl, run, budget=30, round_size=2))
    assert RolloutStore(run).rollouts().height <= 30
    assert outcome.result.spent <= 30
    # A second run with a larger budget continues from the stored state.
    more = evaluate(_opts(arithmetic_jsonl, run, budget=45, round_size=2))
    assert more.result.rollouts > 0 and RolloutStore(run).rollouts().height <= 45


def test_adaptive_run_resumes_after_a_crash(
    arithmetic_jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    real = FakeBackend.generate
    calls = {"n": 0}

    def flaky(self, requests, sampling, mode):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("engine died")
        return real(self, requests, sampling, mode)

    monkeypatch.setattr(FakeBackend, "generate", flaky)
    with pytest.raises(RunError, match="engine died"):
        evaluate(_opts(arithmetic_jsonl, run))
    before = RolloutStore(run).rollouts().sort("sample_id", "rollout_idx")
    assert before.height > 0
    monkeypatch.setattr(FakeBackend, "generate", real)
    resumed = evaluate(_opts(arithmetic_jsonl, run))
    assert resumed.result.skipped == before.height
    after = RolloutStore(run).rollouts().sort("sample_id", "rollout_idx")
    # What was stored before the crash is kept as it was.
    kept = after.join(before.select("sample_id", "rollout_idx"), on=["sample_id", "rollout_idx"])
    assert kept.select("sample_id", "rollout_idx", "completion").equals(
        before.select("sample_id", "rollout_idx", "completion")
    )
    for n, c in _counts(run).values():
        assert (0 < c < n) or n == 6
    assert evaluate(_opts(arithmetic_jsonl, run)).result.rollouts == 0


def test_a_sample_that_always_fails_does_not_loop(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    from curate.backends.base import SamplingConfig
    from curate.evaluation.adaptive import run_adaptive
    from curate.graders import get_grader

    answers = {k: (v[0], float(v[1])) for k, v in fake_answers(arithmetic_jsonl).items()}  # type: ignore[misc]
    prompts = {f"s{i}": q for i, q in enumerate(answers)}
    refs = {f"s{i}": a for i, (a, _) in enumerate(answers.values())}
    backend = FakeBackend(
        answers=answers, fail=lambda r: "HTTP 503" if r.sample_id == "s2" else None
    )
    store = RolloutStore(tmp_path / "run")
    res = run_adaptive(
        store,
        backend=backend,
        grader=get_grader("numeric"),
        prompts=prompts,
        references=refs,
        policy=AdaptivePolicy(round_size=1, max_runs=4),
        sampling=SamplingConfig(),
        mode="completion",
        seed=0,
    )
    assert "re-run to retry" in res.stop_reason
    assert res.errors == 2  # one round's attempt (two draws), then it sits out


def test_report_calls_an_adaptive_run_adaptive_not_ragged(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, run))
    result = CliRunner().invoke(app, ["report", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("adaptive run" in w and "unequal N" in w for w in warnings), warnings
    assert not any("ragged" in w for w in warnings)


def test_a_fixed_top_up_keeps_the_run_marked_adaptive(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, run))
    evaluate(_opts(arithmetic_jsonl, run, adaptive=False, round_size=None, runs=3))
    assert RolloutStore(run).read_manifest()["adaptive"] is True


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--budget", "10"], "--budget only apply with --adaptive"),
        (["--round-size", "2", "--max-rollouts", "4"], "--round-size, --max-rollouts only apply"),
        (["--adaptive", "--balanced", "3", "--max-rollouts", "4"], "cannot hold 3 passes"),
        (["--adaptive", "--round-size", "0"], "--round-size must be at least 1"),
    ],
)
def test_eval_cli_adaptive_errors_are_one_line(
    arithmetic_jsonl: Path, tmp_path: Path, extra: list[str], needle: str
) -> None:
    args = ["eval", str(arithmetic_jsonl), "-m", "fake", "--backend", "fake"]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "run"), *extra])
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not (tmp_path / "run").exists()


def test_eval_cli_adaptive_prints_the_saving(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(arithmetic_jsonl),
            "-m",
            "fake",
            "--backend",
            "fake",
            "-o",
            str(run),
            "-n",
            "6",
            "--adaptive",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "adaptive:" in result.stdout and "saved" in result.stdout
    assert RolloutStore(run).read_manifest()["adaptive"] is True


def test_balanced_run_stops_at_k_and_k(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, run, balanced=2, runs=10))
    for n, c in _counts(run).values():
        assert n <= 10
        assert (c >= 2 and n - c >= 2) or n == 10 or (0 < c < n)
    assert RolloutStore(run).read_manifest()["adaptive_policy"]["balanced"] == 2


@pytest.mark.slow
def test_adaptive_run_on_the_tiny_model(vllm_backend: object, tmp_path: Path) -> None:
    """The real engine: every sample ends mixed or at the cap, and labels stay coherent."""
    from curate.backends.base import SamplingConfig
    from curate.evaluation.adaptive import run_adaptive
    from curate.graders import get_grader
    from tests.conftest import ARITHMETIC, chat_prompts_and_references

    prompts, refs = chat_prompts_and_references(ARITHMETIC, 24)
    store = RolloutStore(tmp_path / "run")
    res = run_adaptive(
        store,
        backend=vllm_backend,  # type: ignore[arg-type]
        grader=get_grader("numeric"),
        prompts=prompts,
        references=refs,
        policy=AdaptivePolicy(round_size=1, max_runs=6),
        sampling=SamplingConfig(temperature=1.0, max_tokens=16),
        mode="chat",
        seed=0,
    )
    counts = _counts(store.run_dir)
    assert len(counts) == len(prompts) and res.spent == sum(n for n, _ in counts.values())
    assert all((0 < c < n) or n == 6 for n, c in counts.values())
    assert res.spent <= 6 * len(prompts)
