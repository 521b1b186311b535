"""Suspect labels in the report: the check (curate.analysis.suspects), the report line,
the JSON section and the `--show suspects` renderers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

import curate.analysis.suspects as suspects_mod
from curate.analysis.suspects import NO_ANSWERS, NONE_EXTRACTED, load_suspects
from curate.report.build import build_report
from curate.report.render import render_json, render_markdown, render_table, suspect_line
from curate.report.suspects import (
    render_suspects_json,
    render_suspects_markdown,
    render_suspects_table,
)
from curate.store.run_dir import RolloutStore
from curate.store.scores import has_answers, read_answers

from .suspect_run import MAJORITY, SAMPLES, SUSPECTS, answer_rows, write_suspect_run


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_suspect_run(tmp_path / "run")


def table_text(report) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=100, color_system=None, force_terminal=False)
    render_table(report.summary, [], console, source=report.source, suspects=report.suspects)
    return buf.getvalue()


def test_load_suspects_lists_the_wrong_references_with_their_reference(run: Path) -> None:
    check = load_suspects(run)
    assert check.checked and check.count == 3 and check.reason is None
    assert check.ids().to_list() == SUSPECTS
    frame = check.frame
    assert frame is not None
    assert frame["reference"].to_list() == [SAMPLES[s][0] for s in SUSPECTS]
    assert frame["majority_answer"].to_list() == [MAJORITY[s][0] for s in SUSPECTS]
    assert frame["n_scored"].to_list() == [8, 8, 8]


def test_reference_from_a_nested_answer_field(tmp_path: Path) -> None:
    run = write_suspect_run(tmp_path / "run", answer_field="reward_model.ground_truth")
    store = RolloutStore(run)
    samples = store.read_samples()
    assert samples is not None
    store.write_samples(
        samples.select(
            "sample_id", pl.struct(pl.col("answer").alias("ground_truth")).alias("reward_model")
        )
    )
    frame = load_suspects(run).frame
    assert frame is not None and frame["reference"].to_list() == ["41", "100", "London"]


def test_a_run_without_samples_lists_no_reference(run: Path) -> None:
    RolloutStore(run).samples_path.unlink()
    frame = load_suspects(run).frame
    assert frame is not None and frame["reference"].to_list() == [None] * 3


def test_the_report_counts_them(run: Path) -> None:
    report = build_report(run)
    assert report.suspects is not None and report.suspects.count == 3
    line = (
        f"suspect labels: 3 samples (majority answer graded wrong); "
        f"list: curate report {run} --show suspects"
    )
    assert line in table_text(report).splitlines()
    md = render_markdown(report.summary, [], source=str(run), suspects=report.suspects)
    assert line.replace("list: ", "list: `").rstrip() + "`" in md.splitlines()
    data = json.loads(render_json(report.summary, [], source=str(run), suspects=report.suspects))
    assert data["suspect_labels"] == {
        "count": 3,
        "close_misses": 0,
        "min_share": 0.6,
        "min_n": 4,
        "reason": None,
    }


def test_no_suspects_is_a_count_of_zero(tmp_path: Path) -> None:
    frame = answer_rows().filter(~pl.col("sample_id").is_in(SUSPECTS))
    table = tmp_path / "scores.parquet"
    frame.write_parquet(table)
    report = build_report(table)
    assert report.suspects is not None and report.suspects.count == 0
    assert suspect_line(report.suspects, str(table)) == (
        "suspect labels: 0 samples (majority answer graded wrong)"
    )


def test_a_score_table_with_answers_is_checked(tmp_path: Path) -> None:
    table = tmp_path / "scores.csv"
    answer_rows().drop("completion").write_csv(table)
    check = build_report(table).suspects
    assert check is not None and check.ids().to_list() == SUSPECTS
    assert check.frame is not None and check.frame["reference"].to_list() == [None] * 3


def test_a_score_table_without_answers_is_not_checked_and_reads_as_before(
    tmp_path: Path,
) -> None:
    table = tmp_path / "scores.csv"
    answer_rows().select("sample_id", "rollout_idx", "score").write_csv(table)
    assert not has_answers(table) and read_answers(table) is None
    report = build_report(table)
    check = report.suspects
    assert check is not None and not check.checked and not check.has_answers
    assert check.reason == NO_ANSWERS
    assert "run directory" in NO_ANSWERS and "`extracted` column" in NO_ANSWERS
    # The summary is unchanged: no line, no JSON key (the goldens hold that output).
    assert "suspect" not in table_text(report)
    assert "suspect" not in render_markdown(report.summary, [], suspects=check)
    assert "suspect_labels" not in json.loads(render_json(report.summary, [], suspects=check))
    # --show suspects says why.
    assert NO_ANSWERS in render_suspects_markdown(check)
    data = json.loads(render_suspects_json(check))
    assert data["suspects"] == [] and data["suspect_labels"]["reason"] == NO_ANSWERS
    assert data["suspect_labels"]["count"] is None


def test_a_grader_without_extracted_answers(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_suspect_run(run)
    store = RolloutStore(run)
    for shard in store.shard_paths():
        shard.unlink()
    store.append(answer_rows().with_columns(pl.lit(None, dtype=pl.String).alias("extracted")))
    check = build_report(run).suspects
    assert check is not None and check.count is None and check.reason == NONE_EXTRACTED
    assert suspect_line(check, str(run)) == f"suspect labels: {NONE_EXTRACTED}"


def test_a_large_run_is_checked_only_on_request(run: Path, monkeypatch) -> None:
    monkeypatch.setattr(suspects_mod, "AUTO_CHECK_ROLLOUTS", 10)
    check = build_report(run).suspects
    assert check is not None and check.count is None
    assert check.reason == (
        f"not checked unasked on 80 rollouts (it reads every answer); "
        f"check: curate report {run} --show suspects"
    )
    asked = build_report(run, suspects=True).suspects
    assert asked is not None and asked.count == 3
    assert build_report(run, suspects=False).suspects is None


def test_thresholds_reach_the_check(run: Path) -> None:
    check = build_report(run, suspect_min_share=0.7, suspect_min_n=8).suspects
    assert check is not None and check.ids().to_list() == ["bad1", "bad3"]
    assert check.summary()["min_share"] == 0.7 and check.summary()["min_n"] == 8
    with pytest.raises(ValueError):
        build_report(run, suspect_min_share=0.0)


def test_show_suspects_renderers(run: Path) -> None:
    check = load_suspects(run)
    data = json.loads(render_suspects_json(check, source=str(run)))
    assert data["source"] == str(run)
    assert [s["sample_id"] for s in data["suspects"]] == SUSPECTS
    assert data["suspects"][1] == {
        "sample_id": "bad2",
        "reference": "100",
        "majority_answer": "1000",
        "majority_share": 0.625,
        "majority_count": 5,
        "n_scored": 8,
    }
    md = render_suspects_markdown(check, source=str(run))
    assert "| sample_id | reference | majority answer | share | N |" in md
    assert "| bad2 | 100 | 1000 | 62.5% | 8 |" in md
    buf = io.StringIO()
    render_suspects_table(
        check, Console(file=buf, width=100, color_system=None, force_terminal=False)
    )
    text = buf.getvalue()
    assert "bad3" in text and "London" in text and "paris" in text and "75.0%" in text
    assert "3 suspect labels" in text


def test_the_report_says_how_many_majority_answers_are_close_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A weak model repeating a near-right answer (rounding, a typo) is flagged as a
    suspect label like a wrong reference is; the count of close misses comes first."""
    import tests.report.suspect_run as suspect_run

    near = {
        "round": ("3.1416", [("3.14", 0)] * 7 + [("3.1416", 1)]),
        "typo": ("Einstein", [("Einstien", 0)] * 6 + [("Bohr", 0)] * 2),
    }
    monkeypatch.setattr(suspect_run, "SAMPLES", {**SAMPLES, **near})
    run = suspect_run.write_suspect_run(tmp_path / "run")
    report = build_report(run)
    assert report.suspects is not None and report.suspects.count == 5
    assert report.suspects.close_misses == 2
    line = (
        "suspect labels: 5 samples (majority answer graded wrong); 2 of the majority "
        "answers are close misses of the reference (likely the model's); "
        f"list: curate report {run} --show suspects"
    )
    assert line in table_text(report).splitlines()
    body = json.loads(render_json(report.summary, [], suspects=report.suspects))
    assert body["suspect_labels"]["close_misses"] == 2


def test_no_close_misses_leaves_the_line_as_it_was(run: Path) -> None:
    report = build_report(run)
    assert report.suspects is not None and report.suspects.close_misses == 0
    assert "close miss" not in table_text(report)
