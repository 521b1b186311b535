"""Reasoning kept apart in the store, and the truncation policy end to end: how a
cut-short rollout is scored, recorded in the manifest, refused on resume with another
policy, and left out of the statistics under `exclude`."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from curate.analysis import load_analysis
from curate.backends.base import Generation, GenerationRequest
from curate.core.rollout import ROLLOUT_FIELDS
from curate.errors import UsageError
from curate.evaluation.evaluate import evaluate
from curate.evaluation.runner import grade_generations
from curate.graders import get_grader
from curate.store.run_dir import RolloutStore
from curate.store.schema import rollout_schema
from curate.store.scores import load_scores, read_answers
from tests.conftest import fake_eval_options

REQ = GenerationRequest(sample_id="a", prompt="p", n=1, first_run=0)


def _grade(gen: Generation, policy: str = "grade", grader: str = "numeric") -> dict[str, object]:
    cols = grade_generations([REQ], [[gen]], {"a": "4"}, get_grader(grader), None, policy)
    return {k: v[0] for k, v in cols.items()}


def test_reasoning_is_stored_apart_and_the_grader_reads_the_answer() -> None:
    row = _grade(
        Generation(text="<think>2+2 is 5? no, 4</think>The answer is 4", finish_reason="stop")
    )
    assert row["completion"] == "The answer is 4"
    assert row["reasoning"] == "2+2 is 5? no, 4"
    assert row["reasoning_closed"] is True and row["truncated"] is False
    assert row["score"] == 1.0


def test_a_model_that_does_not_reason_has_null_reasoning() -> None:
    row = _grade(Generation(text="4", finish_reason="stop"))
    assert row["reasoning"] is None and row["reasoning_closed"] is None
    assert row["completion"] == "4" and row["score"] == 1.0


def test_reasoning_separated_by_the_backend() -> None:
    row = _grade(Generation(text="4", reasoning="two and two", reasoning_closed=True))
    assert (row["completion"], row["reasoning"], row["score"]) == ("4", "two and two", 1.0)
    row = _grade(
        Generation(text=None, reasoning="two and", reasoning_closed=False, finish_reason="length")
    )
    assert row["completion"] is None and row["reasoning_closed"] is False
    assert row["truncated"] is True and row["score"] == 0.0 and row["error"] is None


UNCLOSED = Generation(text="<think>4 4 4 4", finish_reason="length", completion_tokens=9)
CUT_ANSWER = Generation(text="<think>r</think>4", finish_reason="length", completion_tokens=9)
NEVER_CLOSED_STOP = Generation(text="<think>4", finish_reason="stop", completion_tokens=3)


@pytest.mark.parametrize(
    ("policy", "gen", "score", "error"),
    [
        # grade: as it stands. No answer is wrong; an answer cut at max_tokens is graded.
        ("grade", UNCLOSED, 0.0, None),
        ("grade", CUT_ANSWER, 1.0, None),
        ("grade", NEVER_CLOSED_STOP, 0.0, None),
        ("exclude", CUT_ANSWER, 1.0, None),
        ("wrong", CUT_ANSWER, 0.0, None),
        ("wrong", NEVER_CLOSED_STOP, 0.0, None),
        ("error", CUT_ANSWER, None, "truncated: stopped at max_tokens (9 tokens)"),
        ("error", NEVER_CLOSED_STOP, None, "truncated: reasoning never closed"),
    ],
)
def test_policies(policy: str, gen: Generation, score: float | None, error: str | None) -> None:
    row = _grade(gen, policy)
    assert row["truncated"] is True
    assert (row["score"], row["error"]) == (score, error)


def test_a_policy_leaves_whole_rollouts_alone() -> None:
    for policy in ("grade", "wrong", "error", "exclude"):
        row = _grade(Generation(text="<think>r</think>4", finish_reason="stop"), policy)
        assert (row["score"], row["error"], row["truncated"]) == (1.0, None, False)


def test_unknown_policy_is_a_bug() -> None:
    with pytest.raises(ValueError, match="truncation"):
        _grade(Generation(text="4"), "maybe")


# -- end to end through the fake backend (one character is one token) -----------------


@pytest.fixture
def think_data(tmp_path: Path) -> tuple[Path, dict[str, list[object]]]:
    """Four problems: the model reasons briefly on two, at length on two (cut short at
    max_tokens=20 on those)."""
    rows, answers = [], {}
    for i in range(4):
        q = f"What is {i} + {i}?"
        rows.append({"id": f"q{i}", "question": q, "answer": str(2 * i)})
        reasoning = "x" * (3 if i < 2 else 40)
        answers[q] = [f"<think>{reasoning}</think>{2 * i}", 1.0]
    path = tmp_path / "think.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, answers


def _eval(data: Path, answers: dict[str, list[object]], run: Path, **fields: object):  # type: ignore[no-untyped-def]
    settings = {"runs": 4, "max_tokens": 20, "grader": "numeric", **fields}
    opts = fake_eval_options(data, run, answers, **settings)
    return evaluate(opts)


def test_policy_in_manifest_and_resume_refuses_another(think_data, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data, answers = think_data
    run = tmp_path / "run"
    outcome = _eval(data, answers, run, truncation="wrong")
    assert outcome.result.truncated == 8
    assert RolloutStore(run).read_manifest()["truncation"] == "wrong"
    frame = RolloutStore(run).rollouts()
    assert frame.filter(pl.col("truncated"))["score"].to_list() == [0.0] * 8
    assert set(frame.filter(~pl.col("truncated"))["reasoning"].to_list()) == {"xxx"}
    with pytest.raises(UsageError, match=r"--truncated 'wrong' -> 'grade'"):
        _eval(data, answers, run, runs=6)
    # --force-new is the way to change it.
    _eval(data, answers, run, truncation="grade", force_new=True)
    assert RolloutStore(run).read_manifest()["truncation"] == "grade"


def test_bad_policy_is_a_usage_error(think_data, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data, answers = think_data
    with pytest.raises(UsageError, match="--truncated must be one of grade, wrong, error, exclude"):
        _eval(data, answers, tmp_path / "run", truncation="drop")
    assert not (tmp_path / "run").exists()


def test_error_policy_rows_are_not_retried(think_data, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data, answers = think_data
    run = tmp_path / "run"
    first = _eval(data, answers, run, truncation="error")
    assert first.result.errors == 8
    # Nothing left to do: no engine start either (the same seed would cut them again).
    assert RolloutStore(run).missing_pairs(["q0", "q1", "q2", "q3"], 4) == 0
    again = _eval(data, answers, run, truncation="error")
    assert again.result.rollouts == 0


def test_exclude_keeps_rows_stored_and_out_of_every_statistic(think_data, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data, answers = think_data
    run = tmp_path / "run"
    _eval(data, answers, run, truncation="exclude")
    assert RolloutStore(run).rollouts().height == 16  # all stored
    scores = load_scores(run).rollouts
    assert scores.height == 8 and set(scores["sample_id"]) == {"q0", "q1"}
    for fast in (True, False):
        analysis = load_analysis(run, per_sample=not fast)
        assert analysis.summary.rollouts == 8
        assert analysis.summary.mean_score == 1.0
    answers_read = read_answers(run)
    assert answers_read is not None and answers_read.height == 8
    # The same rollouts graded as they stand: every row counts, and those cut short
    # inside their reasoning gave no answer (0).
    graded = tmp_path / "graded"
    _eval(data, answers, graded)
    assert load_analysis(graded).summary.rollouts == 16
    assert load_analysis(graded).summary.mean_score == 0.5


def test_run_written_before_the_reasoning_columns_still_reads(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "old")
    store.create()
    store.write_manifest({"model": "m", "format_version": 1})  # no `truncation` key
    old_cols = [n for n in ROLLOUT_FIELDS if n not in ("reasoning", "reasoning_closed")]
    before = {n: t for n, t in rollout_schema().items() if n in old_cols}
    old = (
        pl.DataFrame(
            {
                "sample_id": ["a", "b"],
                "rollout_idx": [0, 0],
                "score": [1.0, 0.0],
                "completion": ["<think>r</think>4", "5"],
                "truncated": [False, True],
            }
        )
        .select(
            [
                pl.col(n)
                if n in ("sample_id", "rollout_idx", "score", "completion", "truncated")
                else pl.lit(None).alias(n)
                for n in before
            ]
        )
        .cast(before)
    )
    old.write_parquet(store.rollouts_dir / "part-00000000000000000001-1-000000.parquet")
    frame = store.rollouts()
    assert frame["reasoning"].to_list() == [None, None]
    assert frame["reasoning_closed"].to_list() == [None, None]
    # An old run graded as it stood: its truncated row counts.
    assert load_analysis(store.run_dir).summary.rollouts == 2
