"""`hint_run` on the fake backend: which prompts are hinted, that the hinted run
stores every level's rollouts with its hint, that RUN's own files do not change, that
a second call resumes (draws nothing), and that the per-level figures and the
recommendations are those of the stored rollouts (counted here independently)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from curate.engine.evaluate import evaluate
from curate.errors import UsageError
from curate.hinting.run import DATA_FILE, HintRequest, hint_run, plan_hints
from curate.hinting.templates import hinted_text, template_hints
from curate.store.run_dir import RolloutStore
from tests.conftest import fake_eval_options

# id -> (question, answer, the base pass rate)
PROBLEMS = {
    "a1": ("What is 852 * 66?", "56232", 0.0),
    "a2": ("What is 66 * 83?", "5478", 0.0),
    "a3": ("What is 690 + 620?", "1310", 0.0),
    "a4": ("What is 7 * 5?", "35", 0.0),
    "a5": ("What is 3 - 3?", "0", 0.0),  # one character: no hint can be made
    "b1": ("What is 4 + 3?", "7", 1.0),
    "b2": ("What is 64 * 2?", "128", 1.0),
    "c1": ("What is 23 * 5?", "115", 0.5),
}
# The hinted pass rate the fake model has at each level.
LEVEL_RATE = {1: 0.0, 2: 0.5, 3: 1.0}
N = 8


def _files(run: Path) -> dict[str, str]:
    """Every file of RUN but the hinted runs, with its content's hash."""
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and "hints" not in p.relative_to(run).parts
    }


def _hinted_answers() -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for question, answer, _ in PROBLEMS.values():
        for level, hint in template_hints(answer).items():
            out[hinted_text(question, hint)] = [answer, LEVEL_RATE[level]]
    return out


@pytest.fixture
def run(tmp_path: Path) -> Path:
    data = tmp_path / "data.jsonl"
    pl.DataFrame(
        [{"id": k, "question": q, "answer": a} for k, (q, a, _) in PROBLEMS.items()]
    ).write_ndjson(data)
    answers = {q: [a, rate] for q, a, rate in PROBLEMS.values()}
    out = tmp_path / "run"
    evaluate(fake_eval_options(data, out, answers, runs=N, engine_log=False))
    return out


def test_hinted_run_beside_the_run(run: Path) -> None:
    before = _files(run)
    request = HintRequest(run_dir=run, engine_options={"answers": _hinted_answers()})
    outcome = hint_run(request)
    assert _files(run) == before  # RUN's own files (and so its first-N figures) unchanged

    plan = outcome.plan
    assert plan.collapsed == ["a1", "a2", "a3", "a4", "a5"]
    assert plan.without_hint == ["a5"]
    hints = plan.hints
    assert set(hints["hint_of"]) == {"a1", "a2", "a3", "a4"}
    # a4 ("35"): levels 1-3 all show "3", so one level only.
    assert hints.filter(pl.col("hint_of") == "a4")["hint_level"].to_list() == [1]

    hinted = RolloutStore(outcome.hinted_dir)
    rows = hinted.rollouts(["sample_id", "run_idx", "score", "error"])
    assert rows.height == hints.height * N
    assert set(rows["sample_id"]) == set(hints["hint_id"])
    samples = hinted.read_samples()
    assert samples is not None
    for row in samples.iter_rows(named=True):  # the hint is in the prompt each rollout saw
        assert row["question"].endswith(f"\nHint: {row['hint']}")
        assert row["id"] == row["hint_of"]

    # The figures, counted again here from the stored rollouts.
    joined = rows.join(hints, left_on="sample_id", right_on="hint_id")
    per = joined.group_by("sample_id", "hint_of", "hint_level").agg(
        pl.col("score").sum().alias("c"), pl.len().alias("n")
    )
    s = outcome.summary
    assert s.collapsed == 5 and s.group_size == N
    for level in s.levels:
        mine = per.filter(pl.col("hint_level") == level.level)
        assert level.prompts == mine.height
        assert level.pass_rate == pytest.approx(mine["c"].sum() / mine["n"].sum())
        mixed = mine.filter((pl.col("c") > 0) & (pl.col("c") < N)).height
        assert level.mixed_share == pytest.approx(mixed / mine.height)
        assert level.rescued_share == pytest.approx(mixed / 5)
    by_level = {lv.level: lv for lv in s.levels}
    assert by_level[1].pass_rate == 0.0 and by_level[3].pass_rate == 1.0
    assert by_level[3].mixed_share == 0.0  # all-correct groups open no gate either
    for sid, level in s.recommended.items():
        rates = {
            r["hint_level"]: r["c"] / r["n"]
            for r in per.filter(pl.col("hint_of") == sid).rows(named=True)
        }
        fitting = [lv for lv, p in sorted(rates.items()) if 0.25 <= p <= 0.75]
        assert level == (fitting[0] if fitting else None)
    assert s.recommended["a5"] is None

    again = hint_run(request)  # resumes: every rollout is stored already
    assert again.evaluation is not None and again.evaluation.result.rollouts == 0
    assert again.summary.levels == s.levels
    assert _files(run) == before


def test_always_correct_stratum_on_request(run: Path) -> None:
    plan = plan_hints(HintRequest(run_dir=run, stratum="correct"))
    assert plan.collapsed == ["b1", "b2"]
    assert plan.without_hint == ["b1"]
    assert set(plan.hints["hint_of"]) == {"b2"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stratum": "sometimes"}, "--stratum must be one of"),
        ({"group_size": 1}, "-n must be at least 2"),
        ({"band": (0.8, 0.2)}, "--band must be LOW,HIGH"),
    ],
)
def test_bad_requests_write_nothing(run: Path, change: dict[str, object], message: str) -> None:
    before = _files(run)
    with pytest.raises(UsageError, match=message):
        hint_run(HintRequest(run_dir=run, **change))  # type: ignore[arg-type]
    assert _files(run) == before and not (run / "hints").exists()


def test_runs_it_cannot_replay_are_refused(run: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a run directory"):
        plan_hints(HintRequest(run_dir=tmp_path / "nowhere"))
    manifest = json.loads((run / "manifest.json").read_text())
    for key, value, message in (
        ("adaptive", True, "adaptive"),
        ("template", "{question}", "--template"),
        ("grader", "judge", "judge grader"),
    ):
        changed = {**manifest, key: value}
        (run / "manifest.json").write_text(json.dumps(changed))
        with pytest.raises(UsageError, match=message):
            plan_hints(HintRequest(run_dir=run))
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert not (run / "hints").exists()


def test_a_refused_evaluation_leaves_no_hinted_run(run: Path) -> None:
    """A refusal after the data file is written (here: an unknown backend option)
    removes the hinted run it created."""
    with pytest.raises(UsageError):
        hint_run(HintRequest(run_dir=run, engine_options={"no_such_option": 1}))
    assert not (run / "hints").exists()
    assert not (run / "hints" / "incorrect" / DATA_FILE).exists()


def test_hints_written_by_a_model(run: Path) -> None:
    """--hint-model: the writer's replies become the hints, a reply stating the final
    answer is dropped, and a resume reuses the stored hints without asking again."""
    from curate.hinting.writer import hint_prompt

    writer: dict[str, list[object]] = {}
    policy: dict[str, list[object]] = {}
    for sid in ("a1", "a2", "a3", "a4", "a5"):
        question, answer, _ = PROBLEMS[sid]
        for level in (1, 2, 3):
            # a2's level-3 reply gives the answer away; the others are honest.
            reply = f"the answer is {answer}" if (sid, level) == ("a2", 3) else f"try {level}x"
            writer[hint_prompt(question, answer, level)] = [reply, 1.0]
            policy[hinted_text(question, reply)] = [answer, 0.5]
    request = HintRequest(
        run_dir=run,
        hint_model="writer-model",
        hint_backend="fake",
        hint_options={"answers": writer},
        engine_options={"answers": policy},
    )
    outcome = hint_run(request)
    assert outcome.hinted_dir == run / "hints" / "incorrect-model-writer-model"
    hints = outcome.plan.hints
    assert set(hints["hint_source"]) == {"model:writer-model"}
    assert hints.height == 5 * 3 - 1  # a2's level 3 dropped
    assert outcome.plan.without_hint == []  # a model can hint a one-digit answer
    assert all(h.startswith("try ") for h in hints["hint"])
    assert outcome.summary.levels[0].rollouts == 5 * N

    mute = HintRequest(
        run_dir=run,
        hint_model="writer-model",
        hint_backend="fake",
        hint_options={"answers": {}},  # would write other hints if it were asked
        engine_options={"answers": policy},
    )
    again = hint_run(mute)
    assert again.plan.hints.equals(hints)
    assert again.evaluation is not None and again.evaluation.result.rollouts == 0
