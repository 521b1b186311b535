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

from curate.errors import UsageError
from curate.evaluation.evaluate import evaluate
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
    rows = hinted.rollouts(["sample_id", "rollout_idx", "score", "error"])
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


def test_hinted_prompts_export_to_every_trainer_format_and_load_in_trl(
    run: Path, tmp_path: Path
) -> None:
    """The hinted run exports through `curate filter`'s formats unchanged: the hint is
    inside the prompt and `hint_level` a column; TRL's own data utilities read it."""
    datasets = pytest.importorskip("datasets")
    trl_data = pytest.importorskip("trl.data_utils")
    from transformers import AutoTokenizer

    from curate.filtering import FilterRequest, filter_run
    from tests.conftest import TINY_MODEL

    outcome = hint_run(HintRequest(run_dir=run, engine_options={"answers": _hinted_answers()}))
    hinted = outcome.hinted_dir
    out = tmp_path / "exports"
    filter_run(FilterRequest(run=hinted, output=out / "trl", format="trl", keep=("mixed",)))
    for fmt, name in (("verl", "v.parquet"), ("openrlhf", "o.jsonl"), ("openai-rft", "r.jsonl")):
        filter_run(FilterRequest(run=hinted, output=out / name, format=fmt, keep=("mixed",)))
    mixed = outcome.summary.per_prompt.filter(pl.col("mixed"))
    assert mixed.height > 0

    ds = datasets.load_from_disk(str(out / "trl"))
    assert ds.num_rows == mixed.height
    assert set(ds["hint_level"]) <= {1, 2, 3} and ds.features["hint_level"].dtype == "int64"
    tokenizer = AutoTokenizer.from_pretrained(str(TINY_MODEL))
    for row in ds:
        assert trl_data.is_conversational(row)
        rendered = trl_data.maybe_apply_chat_template(row, tokenizer)["prompt"]
        assert rendered.endswith(f"\nHint: {row['hint']}\n<|assistant|>")
        assert row["solution"] == PROBLEMS[row["hint_of"]][1]
    verl = pl.read_parquet(out / "v.parquet")
    assert verl["extra_info"].struct.field("hint_level").to_list() == ds["hint_level"]
    for name, key in (("o.jsonl", "input"), ("r.jsonl", "messages")):
        for line in (out / name).read_text().splitlines():
            row = json.loads(line)
            assert row[key][-1]["content"].endswith(f"\nHint: {row['hint']}")
            assert row["hint_level"] in (1, 2, 3)


@pytest.mark.slow
def test_the_bundled_model_is_rescued_by_hints(tmp_path: Path) -> None:
    """tiny-math on the very-hard problems of the sample set (never solved without a
    hint): some hinted groups of 8 are mixed, and the strongest hints pass most often."""
    pytest.importorskip("vllm")
    from curate.evaluation.options import EvalOptions
    from tests.conftest import ARITHMETIC, TEST_ENGINE_OPTIONS, TINY_MODEL

    data = tmp_path / "very-hard.jsonl"
    pl.read_ndjson(ARITHMETIC).filter(pl.col("difficulty") == "very-hard").head(24).write_ndjson(
        data
    )
    run = tmp_path / "run"
    base = EvalOptions(
        data=data,
        model=str(TINY_MODEL),
        runs=4,
        out=run,
        max_tokens=16,
        engine_options=dict(TEST_ENGINE_OPTIONS),
        engine_log=False,
    )
    evaluate(base)
    outcome = hint_run(HintRequest(run_dir=run, group_size=8, engine_log=False))
    s = outcome.summary
    assert s.collapsed >= 20  # the very-hard band stays out of reach without a hint
    assert s.rescued_any >= 1
    rates = [lv.pass_rate or 0.0 for lv in s.levels]
    assert rates[-1] > rates[0]


def test_a_hinted_run_of_other_hints_is_refused(run: Path) -> None:
    """RUN made again with other outcomes: its hinted run no longer matches, and is
    refused (one line) rather than mixed with new hints."""
    request = HintRequest(run_dir=run, engine_options={"answers": _hinted_answers()})
    hint_run(request)
    data = run / "hints" / "incorrect" / DATA_FILE
    before = data.read_bytes()
    data.write_bytes(before.replace(b"a1@hint1", b"zz@hint1"))
    changed = data.read_bytes()
    with pytest.raises(UsageError, match="holds other hints"):
        hint_run(request)
    assert data.read_bytes() == changed
