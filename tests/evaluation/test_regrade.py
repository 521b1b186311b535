"""`curate grade` as a library call: a run's completions re-scored into a new run."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from curate.errors import InputError, RunError, UsageError
from curate.evaluation.evaluate import evaluate
from curate.evaluation.regrade import NEW_COLUMNS, RegradeOptions, regrade
from curate.graders.judge import CACHE_FILE, JudgeConfig
from curate.store.run_dir import RolloutStore
from tests.conftest import fake_eval_options
from tests.graders.fake_judge import FakeJudge, serve_judge

RATES = [0.0, 0.3, 0.5, 0.8, 1.0, 0.6]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A fake-backend run of 6 samples x 8 (numeric grader); sample s2's rollouts are
    generation errors."""
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
            + "\n"
            for i in range(1, 7)
        )
    )
    answers = {f"What is {i} + {i}?": (str(2 * i), RATES[i - 1]) for i in range(1, 7)}
    run = tmp_path / "run"
    opts = fake_eval_options(data, run, answers, runs=8, grader="numeric")
    evaluate(opts)
    # Turn s2's rollouts into generation errors, as a failed request leaves them.
    store = RolloutStore(run)
    rows = store.rollouts()
    failed = rows.filter(pl.col("sample_id") == "s2").with_columns(
        pl.lit(None, pl.Float64).alias("score"),
        pl.lit(None, pl.String).alias("completion"),
        pl.lit(None, pl.String).alias("extracted"),
        pl.lit("server_error: 500 (gave up after 9 attempts)").alias("error"),
    )
    for shard in store.shard_paths():
        shard.unlink()
    store.append(pl.concat([rows.filter(pl.col("sample_id") != "s2"), failed]))
    return run


def _opts(source: Path, out: Path, grader: str = "exact", **fields: object) -> RegradeOptions:
    return RegradeOptions(source=source, out=out, grader=grader, **fields)  # type: ignore[arg-type]


def test_regrade_keeps_rollouts_and_replaces_grades(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "regraded"
    result = regrade(_opts(source, out, "regex:(\\d+)9$"))  # a grader that inverts numeric
    before = RolloutStore(source).rollouts().sort("sample_id", "rollout_idx")
    after = RolloutStore(out).rollouts().sort("sample_id", "rollout_idx")
    kept = [c for c in before.columns if c not in NEW_COLUMNS]
    assert after.select(kept).equals(before.select(kept))
    assert result.rollouts == 48 and result.generation_errors == 8 and result.graded == 40
    # Generation errors stay what they were.
    s2 = after.filter(pl.col("sample_id") == "s2")
    assert s2["error"].to_list() == ["server_error: 500 (gave up after 9 attempts)"] * 8
    assert s2["score"].null_count() == 8
    # The new grader's view: "X9" completions (wrong under numeric) now hold a match.
    graded = after.filter(pl.col("sample_id") != "s2")
    assert graded["error"].null_count() == 0 or graded["error"].str.starts_with("grader: ").all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["grader"] == "regex:(\\d+)9$"
    assert manifest["regraded_from"]["run"] == str(source.resolve())
    assert manifest["regraded_from"]["grader"] == "numeric"
    assert (out / "samples.parquet").is_file()
    assert not list(tmp_path.glob(".regraded.*"))  # no build directory left


def test_regrade_with_the_same_grader_reproduces_the_scores(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "same"
    regrade(_opts(source, out, "numeric"))
    cols = ["sample_id", "rollout_idx", "score", "error", "extracted"]
    before = RolloutStore(source).rollouts().select(cols).sort("sample_id", "rollout_idx")
    after = RolloutStore(out).rollouts().select(cols).sort("sample_id", "rollout_idx")
    assert after.equals(before)


def test_regrade_refuses_to_overwrite_another_run(source: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is the source run"):
        regrade(_opts(source, source))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="--force"):
        regrade(_opts(source, other))
    assert (other / "notes.txt").read_text() == "mine"
    regrade(_opts(source, other, force=True))
    assert not (other / "notes.txt").exists() and (other / "manifest.json").is_file()
    # The same re-grade again is allowed (rewritten); another grader is not.
    regrade(_opts(source, other))
    with pytest.raises(UsageError, match="--force"):
        regrade(_opts(source, other, "numeric"))


def test_regrade_bad_source(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such run directory"):
        regrade(_opts(tmp_path / "missing", tmp_path / "out"))
    table = tmp_path / "scores.csv"
    table.write_text("sample_id,score\na,1\n")
    with pytest.raises(InputError, match="score table holds no completions"):
        regrade(_opts(table, tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a run directory"):
        regrade(_opts(tmp_path / "empty", tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_regrade_with_a_judge_pays_once(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "judged"
    with serve_judge(FakeJudge(mode="mixed")) as judge:
        config = JudgeConfig(model="judge-m", base_url=judge.url, price_per_mtok=1.0)
        first = regrade(_opts(source, out, "judge", judge=config))
        calls = judge.requests
        assert first.judge_usage is not None and first.judge_usage["calls"] == calls > 0
        again = regrade(_opts(source, out, "judge", judge=config))
        assert judge.requests == calls  # every judgement came from OUT's cache
        assert again.judge_usage is not None and again.judge_usage["cached"] == calls
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judge"]["model"] == "judge-m"
    assert manifest["judge_usage"]["cached"] == calls
    rows = RolloutStore(out).rollouts()
    scored = rows.filter(pl.col("score").is_not_null())
    assert scored["raw_score"].is_in([10.0, 2.0]).all()


def test_failed_regrade_leaves_nothing_at_out_but_keeps_paid_judgements(
    source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "judged"
    with serve_judge() as judge:
        config = JudgeConfig(model="judge-m", base_url=judge.url)
        regrade(_opts(source, tmp_path / "warm", "judge", judge=config))  # a working run
        paid = judge.requests
        judge.status = 401
        with pytest.raises(RunError, match="401"):
            regrade(_opts(source, out, "judge", judge=config))
    assert not out.exists()
    partial = tmp_path / ".judged.partial"
    assert not partial.exists() or [p.name for p in partial.iterdir()] in ([], [CACHE_FILE])
    assert paid > 0
