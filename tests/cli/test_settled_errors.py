"""Errors that recur are settled, through the real CLI: a data set whose references
the grader cannot use (allowed by --max-bad-references) is done after the first run,
every re-run exits as the first one did and generates nothing, and `curate status`
calls it complete (exit 0) and says how many rollouts are done with an error."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from curate.core.settled import SETTLED_COLUMN
from curate.store.run_dir import RolloutStore

RUNS = 3


def _data(path: Path, answers: list[str]) -> Path:
    rows = [
        {"id": f"s{i}", "question": f"What is {i} + 1?", "answer": a} for i, a in enumerate(answers)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _eval(data: Path, run: Path) -> list[object]:
    return [
        "eval", data, "-m", "fake", "--backend", "fake", "-q", "-n", RUNS, "-o", run,
        "--grader", "numeric", "--max-bad-references", "1",
    ]  # fmt: skip


def test_unusable_references_are_settled_and_the_run_is_done(
    inputs: Path, outdir: Path, run_curate
) -> None:
    # Layouts the numeric grader cannot read: words, an empty string, a unit-less range.
    data = _data(inputs / "mixed.jsonl", ["2", "3", "four", "", "5-6", "7"])
    run = outdir / "run"
    first = run_curate(*_eval(data, run))
    assert first.returncode == 0, first.stderr
    assert "9 settled" in first.stdout
    rows = RolloutStore(run).rollouts()
    bad = rows.filter(pl.col("sample_id").is_in(["s2", "s3", "s4"]))
    assert bad.height == 3 * RUNS
    assert bad["error"].str.starts_with("grader: ").all() and bad[SETTLED_COLUMN].all()
    good = rows.filter(~pl.col("sample_id").is_in(["s2", "s3", "s4"]))
    assert (
        good["error"].null_count() == good.height
        and good[SETTLED_COLUMN].null_count() == good.height
    )
    shards = RolloutStore(run).shard_paths()

    again = run_curate(*_eval(data, run))
    assert again.returncode == first.returncode, again.stderr
    assert "0 new rollouts" in again.stdout
    assert RolloutStore(run).shard_paths() == shards  # nothing regenerated

    status = run_curate("status", run, "--format", "json")
    assert status.returncode == 0, status.stdout
    body = json.loads(status.stdout)
    assert body["complete"] and body["missing"] == 0
    assert body["done"] == 6 * RUNS and body["settled"] == 3 * RUNS and body["errors"] == 0
    table = run_curate("status", run)
    assert table.returncode == 0
    assert (
        f"complete: {6 * RUNS} of {6 * RUNS} rollouts; {3 * RUNS} of them done with an error"
        in (" ".join(table.stdout.split()))
    )


def test_a_run_that_can_never_score_fails_the_same_way_every_time(
    inputs: Path, outdir: Path, run_curate
) -> None:
    data = _data(inputs / "words.jsonl", ["four", "five"])
    run = outdir / "run"
    runs = [run_curate(*_eval(data, run)) for _ in range(2)]
    assert [r.returncode for r in runs] == [1, 1]
    for result in runs:
        assert f"none of the {2 * RUNS} rollouts can be scored" in result.stdout
    assert "0 new rollouts" in runs[1].stdout
    status = run_curate("status", run)
    assert status.returncode == 0  # nothing is missing: a scheduler's wait ends


def test_older_shards_read_as_retryable_except_cut_short_rows(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    old = pl.DataFrame(
        {
            "sample_id": ["a", "a", "a"],
            "rollout_idx": [0, 1, 2],
            "score": [1.0, None, None],
            "error": [None, "connection: refused (gave up after 5 attempts)", "truncated: x"],
        },
        schema_overrides={"rollout_idx": pl.Int32},
    )
    old.write_parquet(store.rollouts_dir / "part-00000000000000000001-1-000000.parquet")
    tally = store.pair_tally(["a"], 3)
    assert (tally.scored, tally.settled, tally.missing) == (1, 1, 1)
    read = store.rollouts(["sample_id", "rollout_idx", "error", SETTLED_COLUMN])
    assert read[SETTLED_COLUMN].to_list() == [None, None, None]
