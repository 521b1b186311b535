"""Empty answers in the report: which completions count (no letter or digit, in any
script), the count and one example in JSON, table and Markdown from a share of
WARN_SHARE, the example shown as text and never as markup, and texts read only for
short completions when the run counts tokens."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from curate.analysis.empty import SHORT_TOKENS, WARN_SHARE, load_empty
from curate.report.build import build_report
from curate.report.render import render_json, render_markdown, render_table
from curate.store.run_dir import RolloutStore

EMPTY = ["", " ", "\n\n", "...", "**", "```\n```", "[/]", "\t-\t", "。"]
NOT_EMPTY = ["45", "B", "x", "é", "五", "٣", "The answer is 7.", " 0 "]


def _run(path: Path, completions: list[str | None], *, tokens: bool = True) -> Path:
    store = RolloutStore(path)
    store.create()
    store.write_manifest({"model": "m", "backend": "fake", "runs": 1, "mode": "chat"})
    n = len(completions)
    frame = pl.DataFrame(
        {
            "sample_id": [f"s{i:03d}" for i in range(n)],
            "rollout_idx": [0] * n,
            "score": [0.0] * n,
            "completion": completions,
            "completion_tokens": [max(1, len(c or "")) for c in completions],
        },
        schema_overrides={"rollout_idx": pl.Int32, "completion_tokens": pl.Int32},
    )
    store.append(frame if tokens else frame.drop("completion_tokens"))
    return path


@pytest.mark.parametrize("tokens", [True, False])
def test_counts_answers_without_a_letter_or_digit(tmp_path: Path, tokens: bool) -> None:
    run = _run(tmp_path / "run", [*EMPTY, *NOT_EMPTY], tokens=tokens)
    section = load_empty(run)
    assert section is not None
    assert section["rollouts"] == len(EMPTY) + len(NOT_EMPTY)
    assert section["empty"] == len(EMPTY)
    assert section["example"] == {"sample_id": "s000", "rollout_idx": 0, "completion": ""}


def test_only_short_completions_are_looked_at_when_tokens_are_counted(tmp_path: Path) -> None:
    # Past SHORT_TOKENS tokens a completion is not read as text: a long run of dots is
    # not counted (the rule's stated limit), a short one is.
    dots = "." * (SHORT_TOKENS * 2 + 2)  # _run counts a token per character
    run = _run(tmp_path / "run", ["x" * 40] * 3 + [dots, "  "])
    section = load_empty(run)
    assert section is not None and section["rollouts"] == 5 and section["empty"] == 1
    assert section["example"]["completion"] == "  "
    counted = _run(tmp_path / "counted", [dots, "  "], tokens=False)
    assert load_empty(counted)["empty"] == 2  # type: ignore[index]


def test_error_rows_are_not_counted(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", ["", "7"])
    store = RolloutStore(run)
    store.append(
        pl.DataFrame(
            {"sample_id": ["z"], "rollout_idx": [0], "error": ["timeout"]},
            schema_overrides={"rollout_idx": pl.Int32},
        )
    )
    section = load_empty(run)
    assert section is not None and (section["rollouts"], section["empty"]) == (2, 1)


def _renders(run: Path) -> tuple[str, str, dict]:
    report = build_report(run, suspects=False)
    buf = io.StringIO()
    render_table(
        report.summary, [], Console(file=buf, width=200, color_system=None), source=str(run)
    )
    md = render_markdown(report.summary, [], source=str(run))
    data = json.loads(render_json(report.summary, [], source=str(run)))
    return buf.getvalue(), md, data


def test_a_high_share_is_flagged_everywhere_with_one_example(tmp_path: Path) -> None:
    # 63% empty, as a chat model given a system turn it does not know answered; the
    # first example holds rich markup, which must print as the text it is.
    completions = ["[/]"] + [""] * 62 + ["42"] * 37
    text, md, data = _renders(_run(tmp_path / "run", completions))
    section = data["empty_completions"]
    assert section["empty"] == 63 and section["rollouts"] == 100 and section["share"] == 0.63
    assert section["example"]["completion"] == "[/]"
    line = "empty answers: 63 of 100 completions (63.0%) hold no letter or digit"
    assert (
        f"{line}; the prompt format may not suit the model. E.g. sample s000 run 0: '[/]'" in text
    )
    assert line in md and "`` '[/]' ``" not in md and "` '[/]' `" in md


def test_a_low_share_is_counted_in_json_only(tmp_path: Path) -> None:
    share = WARN_SHARE / 2
    n = 100
    k = int(n * share)
    text, md, data = _renders(_run(tmp_path / "run", [""] * k + ["42"] * (n - k)))
    assert data["empty_completions"]["empty"] == k
    assert "empty answers" not in text and "empty answers" not in md


def test_a_score_table_without_completions_has_no_section(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("sample_id,score\na,1\na,0\n")
    _, _, data = _renders(path)
    assert "empty_completions" not in data
