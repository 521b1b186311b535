"""`curate eval`'s grading options end to end (fake backend): references read and
checked before anything is generated, the start lines, the refusal, the early stop on
a failing grader, the error summary, and one-line errors for bad grading options."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.store.run_dir import RolloutStore
from tests.conftest import ROOT, Result

GSM8K = ROOT / "sample_data" / "gsm8k_layout.jsonl"
BROKEN = "The answer is in the table"  # no '#### N' line, and not a number


def _eval(out: Path, data: Path, *extra: object) -> list[object]:
    return ["eval", data, "--model", "fake-model", "--backend", "fake", "--out", out, *extra]


def _broken_gsm8k(path: Path, every: int = 10) -> Path:
    """The GSM8K-layout file with every `every`-th reference broken (10%)."""
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    for i, row in enumerate(rows):
        if i % every == every - 1:
            row["answer"] = BROKEN
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_gsm8k_layout_is_read_graded_numeric_and_recorded(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = cli(*_eval(out, GSM8K, "-n", "2"))
    assert res.exit_code == 0, res.stderr
    lines = res.stderr.splitlines()[:8]  # then the progress lines
    assert lines[0] == "layout: gsm8k (math; detected: question, answer)"
    assert (
        lines[1]
        == "references: gsm8k (auto): answer from the '#### N' line, in 40 of 40 references"
    )
    assert lines[2] == "grader: numeric (auto: 40 of 40 references are numbers)"
    assert lines[3] == "check: grader 'numeric' accepts all 40 references"
    # The fake model has no local chat template: its messages are shown instead.
    assert "as the model sees it (chat messages" in res.stderr
    assert "  | [user] What is 825 + 506?" in lines
    # As written: the rationale's newline is not shown as a doubled-backslash escape.
    assert "reference as graded: '1331' (from 'We add the two numbers. T...')" in lines
    assert all(len(line) <= 80 for line in lines), lines
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["grader"] == "numeric"
    assert manifest["grader_reason"].startswith("numeric (auto: 40 of 40")
    extract = manifest["reference_extract"]
    assert (extract["requested"], extract["mode"], extract["applied"]) == ("auto", "gsm8k", 40)
    check = manifest["reference_check"]
    assert (check["total"], check["bad"], check["examples"]) == (40, 0, [])
    assert manifest["grader_timeout_s"] == 10.0 and manifest["score_range"] is None


def test_dry_run_prints_the_start_lines_and_writes_nothing(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = cli(*_eval(out, GSM8K, "--dry-run"))
    assert res.exit_code == 0, res.stderr
    assert res.stderr.startswith("layout: gsm8k (math; detected")
    assert "references: gsm8k (auto)" in res.stderr
    assert "reference as graded: '1331'" in res.stderr
    assert "dry run: 40 samples x 8 rollouts" in res.stdout
    assert not out.exists()
    # --quiet: nothing on stderr but errors, for scripts.
    res = cli(*_eval(out, GSM8K, "--dry-run", "--quiet"))
    assert res.exit_code == 0 and res.stderr == ""


def test_unusable_references_are_refused_before_the_engine_starts(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    data = _broken_gsm8k(tmp_path / "broken.jsonl")
    out = tmp_path / "run"
    for extra in ([], ["--dry-run"]):
        res = cli(*_eval(out, data, "-n", "2", *extra))
        assert res.exit_code == 2, res.stderr
        error = [line for line in res.stderr.splitlines() if line.startswith("curate: error:")]
        assert len(error) == 1
        head = error[0]
        assert str(data) in head and "cannot use 4 of 40 references" in head
        for option in ("--reference-extract", "--grader", "--max-bad-references 0.1"):
            assert option in head
        examples = res.stderr.split(head, 1)[1].strip().splitlines()
        assert len(examples) == 3 and all(BROKEN in line for line in examples)
        assert "Traceback" not in res.stderr
        assert not out.exists()  # nothing written, no engine opened
    # The grader is chosen on the references gsm8k could read; the 4 unread are the
    # check's to report, not a reason to grade everything as strings.
    assert "numeric (auto: 36 of 36 references are numbers; 4 unread left out)" in res.stderr


def test_allowed_bad_references_run_and_the_manifest_holds_the_check(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    data = _broken_gsm8k(tmp_path / "broken.jsonl")
    out = tmp_path / "run"
    res = cli(*_eval(out, data, "-n", "2", "--quiet", "--max-bad-references", "0.2"))
    assert res.exit_code == 0, res.stderr
    check = json.loads((out / "manifest.json").read_text())["reference_check"]
    assert (check["total"], check["bad"], check["unparsable"]) == (40, 4, 4)
    assert check["max_bad_fraction"] == 0.2
    assert [e["reference"] for e in check["examples"]] == [repr(BROKEN)] * 4
    # The 4 samples' rollouts are error rows, and the summary says why.
    assert "8 errors" in res.stdout
    summary = res.stdout.split("errors by message (1 distinct):\n", 1)[1].splitlines()
    assert summary[0] == f"  8  grader: reference is not a number: {BROKEN!r}"


def test_a_grader_failing_on_every_rollout_stops_after_the_first_chunk(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    # Accepts its own references (the check passes), fails on what the model writes.
    grader = tmp_path / "boxed_only.py"
    grader.write_text(
        "def score(completion, reference):\n"
        "    if 'boxed' not in completion:\n"
        "        raise ValueError('no boxed answer to read')\n"
        "    return f'{{{reference}}}' in completion\n"
    )
    out = tmp_path / "run"
    args = _eval(out, GSM8K, "-n", "4", "--chunk-size", "2", "--grader", f"python:{grader}:score")
    res = cli(*args, "--quiet")
    assert res.exit_code == 1, res.stderr
    error = res.stderr.strip().splitlines()[-1]
    assert error.startswith("curate: error: grader 'python:")
    assert "failed on all of the first 8 graded rollouts: ValueError: no boxed answer" in error
    assert "re-run the same command to resume" in error
    # What finished is stored (one chunk: 2 samples x 4 rollouts), ready to resume.
    stored = RolloutStore(out).rollouts()
    assert stored.height == 8 and stored["error"].null_count() == 0
    assert len(RolloutStore(out).shard_paths()) == 1


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--reference-extract", "nope"], "--reference-extract 'nope': expected one of auto"),
        (["--score-range", "1:0"], "--score-range '1:0': expected two finite numbers"),
        (["--score-range", "abc"], "--score-range 'abc': expected LO:HI"),
        (["--max-bad-references", "2"], "--max-bad-references 2: expected a fraction"),
        (["--grader-timeout", "0"], "--grader-timeout 0: expected a positive number"),
        (["--grader", "verl:missing_reward.py:f"], "missing_reward.py"),
        (["--grader", "numeric", "--score-range", "0:10"], "a score range applies to"),
    ],
)
def test_bad_grading_options_are_one_line_and_write_nothing(
    cli: Callable[..., Result], tmp_path: Path, extra: list[str], needle: str
) -> None:
    out = tmp_path / "run"
    for dry in ([], ["--dry-run"]):
        res = cli(*_eval(out, GSM8K, *extra, *dry))
        assert res.exit_code == 2, res.stderr
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and needle in lines[0], res.stderr
        assert "Traceback" not in res.stderr
        assert not out.exists()


def test_score_range_reaches_a_trl_reward_and_raw_score_is_stored(
    cli: Callable[..., Result], tmp_path: Path
) -> None:
    reward = tmp_path / "reward.py"
    reward.write_text(
        "def reward(prompts, completions, answer, **columns):\n"
        "    # Chat prompts (TRL's conversational format): completions are messages.\n"
        "    assert all(p[-1]['role'] == 'user' for p in prompts)\n"
        "    texts = [c[0]['content'] for c in completions]\n"
        "    final = [a.split('#### ')[-1].replace(',', '') for a in answer]\n"
        "    # +1 when the completion holds the reference's final number, else -1\n"
        "    return [1.0 if f in t.replace(',', '') else -1.0\n"
        "            for t, f in zip(texts, final)]\n"
    )
    out = tmp_path / "run"
    res = cli(
        *_eval(out, GSM8K, "-n", "2"),
        "--grader",
        f"trl:{reward}:reward",
        "--score-range=-1:1",
        "--limit",
        "5",
    )
    assert res.exit_code == 0, res.stderr
    # A reward function reads the data as stored: no extraction under auto.
    assert "references: as given (auto: a reward function reads the data as stored)" in (res.stderr)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["score_range"] == [-1.0, 1.0]
    assert manifest["reference_extract"]["mode"] == "none"
    rows = RolloutStore(out).rollouts()
    assert rows["error"].null_count() == rows.height
    # The fake model writes '?' or '?9': the reward's -1 is stored raw, mapped to 0.
    assert rows["raw_score"].to_list() == [-1.0] * 10
    assert rows["score"].to_list() == [0.0] * 10
    assert rows.schema["raw_score"] == pl.Float64
