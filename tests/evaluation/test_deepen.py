"""`curate eval --deepen K --to M` through the real eval path (the fake backend).

The class under test: populations whose multiplier N rollouts cannot decide because a
block of prompts is never (or always) solved. Deepening a random K of the all-same
prompts must narrow the multiplier's interval around the truth, while every
descriptive figure of the report (the first N rollouts of every prompt) stays exactly
as it was; the choice is seeded, recorded, and resumed after an interrupt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from curate.analysis.compare import compare_runs
from curate.core.deepen import (
    CORRECT,
    INCORRECT,
    DeepenRequest,
    choose,
    deepening_start,
    split_k,
)
from curate.core.settled import SETTLED_COLUMN
from curate.errors import UsageError
from curate.evaluation.deepen import plan_deepen
from curate.evaluation.evaluate import Interrupted, evaluate
from curate.evaluation.options import EvalOptions
from curate.evaluation.progress import NullProgress, OutcomeTally
from curate.report.build import build_report
from curate.store.run_dir import RolloutStore
from curate.store.scores import load_scores
from tests.conftest import fake_eval_options, long_frame
from tests.stats.test_stats_populations import at, beta, mixture, true_multiplier, u

N, G, TO = 8, 8, 32
# Figures that describe the first N rollouts of every prompt: a deepen leaves them be.
DESCRIPTIVE = (
    "samples",
    "rollouts",
    "errors",
    "mean_score",
    "best_of_n",
    "potential_gain",
    "relative_gain",
    "high_variance_fraction",
    "categories",
    "pass_at_k",
    "rollouts_per_sample",
    "lengths",
    "empty_completions",
)


def population_run(tmp_path: Path, rates: np.ndarray, **fields: Any) -> EvalOptions:
    """A data set whose prompt i the fake backend solves at rate `rates[i]`."""
    rows, answers = [], {}
    for i, rate in enumerate(rates.tolist()):
        question = f"What is {i} + {i}?"
        rows.append({"id": f"q{i:05d}", "question": question, "answer": str(2 * i)})
        answers[question] = [str(2 * i), rate]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return fake_eval_options(data, tmp_path / "run", answers, runs=N, chunk_size=2048, **fields)


def summary_of(run: Path) -> dict[str, Any]:
    """The report's summary (`curate report --format json`'s figures)."""
    return build_report(run, group_size=G).summary.to_dict()


def test_deepening_a_block_at_zero_narrows_the_multiplier_around_the_truth(
    tmp_path: Path,
) -> None:
    """40% of prompts at exactly 0, the rest Beta(2,3): undecided at N=8 (2x-8x fit);
    400 of the ~1,900 all-same prompts deepened to 32 pin it down."""
    rng = np.random.default_rng(7)
    rates = mixture((0.4, at(0.0)), (0.6, beta(2, 3)))(rng, 4000)
    opts = population_run(tmp_path, rates)
    evaluate(opts)
    before = summary_of(opts.run_dir())
    m0 = before["compute_multiplier"]
    assert not m0["decided"], m0
    assert m0["remedy"] == {"deepen": 400, "to": 72}
    assert "--deepen 400 --to 72" in m0["reason"]

    deep = EvalOptions(**{**opts.__dict__, "deepen": 400, "deepen_to": TO})
    outcome = evaluate(deep)
    assert outcome.result.rollouts == 400 * (TO - N)
    manifest = RolloutStore(opts.run_dir()).read_manifest()
    (record,) = manifest["deepen"]
    chosen = record["samples"][INCORRECT] + record["samples"][CORRECT]
    assert len(chosen) == 400 and record["to"] == TO and record["nominal_runs"] == N
    assert deepening_start(manifest) == N

    after = summary_of(opts.run_dir())
    assert after["deepened"] == {
        "nominal_runs": N,
        "prompts": 400,
        "rollouts": 400 * (TO - N),
        "max_rollouts": TO,
    }
    assert {"lengths", "empty_completions"} <= set(before)
    for key in DESCRIPTIVE:
        assert after[key] == before[key], key
    assert after["gate"]["expected_open_fraction"] == before["gate"]["expected_open_fraction"]
    m1 = after["compute_multiplier"]
    width = lambda m: m["recommended_range"]["high"] - m["recommended_range"]["low"]  # noqa: E731
    assert width(m1) < width(m0), (m0["recommended_range"], m1["recommended_range"])
    truth = true_multiplier(rates, G)
    assert m1["recommended_range"]["low"] <= truth <= m1["recommended_range"]["high"]
    big = m1["recommended_group_size"]
    share = float(np.mean(u(rates, big)))
    interval = m1["recommended_open_interval"]
    assert interval["low"] <= share <= interval["high"], (share, interval)

    # `compare` sees the run as the report does: the same prior, the same multiplier.
    shown = compare_runs([opts.run_dir(), opts.run_dir()], group_size=G).runs[0].summary
    assert shown.compute_multiplier.recommended_range == m1["recommended_range"]

    # The prior saw the deepening rows; per-sample readers did not.
    rows = load_scores(opts.run_dir()).rollouts
    assert rows["rollout_idx"].max() == N - 1
    every = load_scores(opts.run_dir(), deepening=True).rollouts
    deepened = every.filter(pl.col("rollout_idx") >= N)
    assert set(deepened["sample_id"].unique().to_list()) == set(chosen)


def test_an_interrupted_deepen_resumes_its_own_choice(tmp_path: Path) -> None:
    """Killed after its first chunk, the same command draws the rest of the same
    prompts' rollouts: none twice, none for a prompt it did not choose."""
    rates = np.array([0.0, 1.0, 0.5, 0.0, 0.0, 1.0, 0.3, 0.0] * 10)
    opts = population_run(tmp_path, rates)
    evaluate(opts)
    deep = EvalOptions(**{**opts.__dict__, "deepen": 12, "deepen_to": 16, "chunk_size": 4})

    class Stop(NullProgress):
        def advance(self, rollouts: int, errors: int, tally: OutcomeTally) -> None:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        evaluate(deep, progress=Stop())
    store = RolloutStore(opts.run_dir())
    (record,) = store.read_manifest()["deepen"]
    done = evaluate(deep)
    assert done.deepen is not None and done.deepen.resumed
    assert done.deepen.record == record
    again = evaluate(deep)  # nothing left: nothing drawn, the record kept once
    assert again.result.rollouts == 0
    assert len(store.read_manifest()["deepen"]) == 1
    stored = store.rollouts(["sample_id", "rollout_idx"])
    per = stored.group_by("sample_id").agg(pl.len().alias("n"))
    chosen = set(record["samples"][INCORRECT] + record["samples"][CORRECT])
    assert len(chosen) == 12
    assert record["pool"] == {INCORRECT: 40, CORRECT: 20}  # split 8 : 4 in proportion
    assert len(record["samples"][INCORRECT]) == 8
    assert dict(per.rows()) == {sid: (16 if sid in chosen else N) for sid in per["sample_id"]}
    # A later resume without --deepen keeps the record (else the report would count
    # the deepening rows as the run's own).
    evaluate(opts)
    assert store.read_manifest()["deepen"] == [record]
    # A smaller K draws a subset of the same prompts, all deep enough already: its
    # choice is recorded and nothing is drawn.
    smaller = evaluate(EvalOptions(**{**deep.__dict__, "deepen": 6}))
    assert smaller.result.rollouts == 0
    assert smaller.deepen is not None and not smaller.deepen.resumed
    first, second = store.read_manifest()["deepen"]
    assert first == record and second["k"] == 6
    assert set(smaller.deepen.targets) <= chosen


def test_the_choice_is_seeded_nested_and_proportional() -> None:
    """The class: any pool sizes and seeds. A larger K deepens a superset; another seed
    another subset; the split follows the strata's sizes."""
    pools = {INCORRECT: [f"a{i}" for i in range(300)], CORRECT: [f"b{i}" for i in range(100)]}
    small, large = choose(pools, 40, seed=0), choose(pools, 80, seed=0)
    for s in pools:
        assert set(small[s]) <= set(large[s])
    assert [len(small[s]) for s in pools] == [30, 10]
    assert choose(pools, 40, seed=1) != small
    shuffled = {s: list(reversed(ids)) for s, ids in pools.items()}
    assert choose(shuffled, 40, seed=0) == small
    assert split_k(5, {INCORRECT: 1, CORRECT: 1}) == {INCORRECT: 1, CORRECT: 1}
    assert split_k(3, {INCORRECT: 0, CORRECT: 7}) == {INCORRECT: 0, CORRECT: 3}


def hand_made_run(tmp_path: Path, scores: dict[str, list[float | None]], **manifest: Any):
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest({"runs": 4, **manifest})
    frame = long_frame(scores)
    # A failed rollout here recurs (settled): the run counts as finished.
    store.append(frame.with_columns(pl.col("error").is_not_null().alias(SETTLED_COLUMN)))
    return store


def test_the_strata_are_the_first_n_rollouts_all_scored_and_all_equal(tmp_path: Path) -> None:
    """A failed rollout among the first N keeps a prompt out of both strata; K larger
    than the pool deepens the whole pool; rollouts past N do not move a prompt."""
    store = hand_made_run(
        tmp_path,
        {
            "a": [0, 0, 0, 0],
            "b": [0, 0, None, 0],
            "c": [1, 1, 1, 1, 0],  # a fifth rollout (an earlier deepen) changes nothing
            "d": [0, 1, 0, 0],
        },
    )
    plan = plan_deepen(store, store.read_manifest(), DeepenRequest(k=10, to=8), "abcd", 4, 0)
    assert plan.record["samples"] == {INCORRECT: ["a"], CORRECT: ["c"]}
    assert plan.record["pool"] == {INCORRECT: 1, CORRECT: 1}
    assert plan.targets == {"a": 8, "c": 8}


@pytest.mark.parametrize(
    ("scores", "manifest", "words"),
    [
        ({"a": [0.5, 0.5, 0.5, 0.5], "b": [0, 0, 0, 0]}, {}, "needs 0/1 scores"),
        ({"a": [0, 0, 0, 0]}, {"adaptive": True}, "this one is adaptive"),
        ({"a": [0, 1, 0, 1]}, {}, "no prompt is always incorrect or always correct"),
        ({"a": [0, 0, 0]}, {}, "1 of the first 4 rollouts per prompt are still missing"),
        ({"a": [0, 0, 0, 0]}, {"runs": 2}, "this run has -n 2; give -n 2"),
    ],
)
def test_a_run_deepening_cannot_help_is_refused(
    tmp_path: Path, scores: dict[str, list[float | None]], manifest: dict[str, Any], words: str
) -> None:
    store = hand_made_run(tmp_path, scores, **manifest)
    with pytest.raises(UsageError, match=words):
        plan_deepen(store, store.read_manifest(), DeepenRequest(k=2, to=8), list(scores), 4, 0)
