"""curate.view.site and `curate view` without a browser: what the site's data files hold
against `curate report` and `curate compare`, every stored rollout in a chunk, the
completion cap, and bad input (one line, exit 2, nothing half-written)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.core.outcome import CATEGORIES
from curate.store.run_dir import RolloutStore
from curate.view import build_site
from curate.view.site import ASSETS, MARKER
from tests.conftest import ROOT
from tests.view.conftest import curate, read_call
from tests.view.runs import HOSTILE_ID, PAYLOAD, write_run


def _index(site: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    meta, table = read_call(site / "data" / "index.js")
    return meta, table


def _rows(columns: dict[str, list[Any]] | None) -> list[dict[str, Any]]:
    """A run's rollouts of a sample, from the chunk's columns (as the page reads them)."""
    if columns is None:
        return []
    return [
        {k: v[i] for k, v in columns.items() if v[i] is not None} for i in range(len(columns["i"]))
    ]


def _value(report: dict[str, Any], key: str) -> Any:
    value: Any = report
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def test_headline_figures_are_the_report_json_to_the_last_digit(
    site: Path, reports: list[dict[str, Any]]
) -> None:
    meta, _ = _index(site)
    for run, report in zip(meta["runs"], reports, strict=True):
        assert run["report"] == report
        assert len(run["headline"]) >= 10
        for row in run["headline"]:
            assert row["text"] == json.dumps(_value(report, row["key"])), row


def test_table_columns_count_what_the_report_counts(
    site: Path, reports: list[dict[str, Any]], compared: dict[str, Any]
) -> None:
    _, table = _index(site)
    for columns, report in zip(table["runs"], reports, strict=True):
        counts = {c: columns["category"].count(i) for i, c in enumerate(CATEGORIES)}
        assert counts == report["categories"]
        assert sum(columns["suspect"]) == report["suspect_labels"]["count"]
        assert sum(columns["errors"]) == report["errors"]
    # The transition column counts what `curate compare` counts.
    for t in compared["transitions"]:
        name = f"{t['before'].replace('_', ' ')} \u2192 {t['after'].replace('_', ' ')}"
        assert table["transition"].count(table["transitions"].index(name)) == t["count"]
    for name, entry in compared["sets"].items():
        assert table["set"].count(table["sets"].index(name)) == entry["count"]
    assert set(table["groups"]) == {"gsm8k", "math"}


def test_every_stored_rollout_is_in_a_chunk_as_stored(site: Path, runs: tuple[Path, Path]) -> None:
    meta, table = _index(site)
    samples: dict[str, Any] = {}
    for k in range(meta["chunks"]):
        number, items = read_call(site / "data" / f"chunk-{k}.js")
        assert number == k
        samples.update({s["id"]: s for s in items})
    assert list(samples) == table["id"]
    for j, run in enumerate(runs):
        stored = RolloutStore(run).rollouts()
        shown = [(sid, r) for sid, s in samples.items() for r in _rows(s["ro"][j])]
        assert len(shown) == stored.height
        errors = [r for _, r in shown if "e" in r]
        assert len(errors) == stored["error"].drop_nulls().len()
        assert all("s" not in r for r in errors)  # an error row has no score
        hostile = samples[HOSTILE_ID]
        assert [r.get("c") for r in _rows(hostile["ro"][j])][:3] == [PAYLOAD] * 3
        # Every stored field of every rollout, as stored (the first run's first sample).
        first = stored.filter(stored["sample_id"] == table["id"][1]).sort("rollout_idx").to_dicts()
        for row, shown_row in zip(first, _rows(samples[table["id"][1]]["ro"][j]), strict=True):
            assert shown_row["i"] == row["rollout_idx"] and shown_row.get("c") == row["completion"]
            assert shown_row.get("s") == row["score"] and shown_row.get("e") == row["error"]
            assert (
                shown_row.get("r") == row["reasoning"]
                and shown_row["ct"] == row["completion_tokens"]
            )
    evil = samples[HOSTILE_ID]
    assert evil["p"][0][1] == ["user", PAYLOAD]  # chat turns, the system turn first
    assert evil["p"][0][0][0] == "system"
    assert evil["ref"][0] == ["7", f"#### 7\n{PAYLOAD}"]  # as graded, as stored


def test_max_chars_caps_completions_and_says_so(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", samples=6, runs=2)
    result = build_site([run], tmp_path / "site", max_chars=10)
    assert result.capped > 0
    _, items = read_call(tmp_path / "site" / "data" / "chunk-0.js")
    shown = [r for s in items for r in _rows(s["ro"][0])]
    cut = [r for r in shown if "cn" in r]
    assert cut and all(len(r["c"]) == 10 and r["cn"] > 10 for r in cut)
    assert all(len(r.get("c", "")) <= 10 and len(r.get("r", "")) <= 10 for r in shown)
    stored = RolloutStore(run).rollouts()
    long = stored["completion"].str.len_chars() > 10
    assert len(cut) == int(long.sum())
    assert result.capped == len(cut) + int((stored["reasoning"].str.len_chars() > 10).sum())
    # 0 keeps everything: the site replaces the previous one in place.
    again = build_site([run], tmp_path / "site", max_chars=0)
    assert again.capped == 0 and again.bytes > result.bytes


def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "site"
    done = curate("view", tmp_path / "missing-run", "-o", out)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "missing-run" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
    # A directory that is not a site of this command is never overwritten.
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    run = write_run(tmp_path / "run", samples=4, runs=2)
    done = curate("view", run, "-o", precious)
    assert done.returncode == 2 and "not a site written by `curate view`" in done.stderr
    assert [p.name for p in precious.iterdir()] == ["notes.txt"]
    # A missing --group-by column: the report's own error, and no site.
    done = curate("view", run, "-o", out, "--group-by", "nope")
    assert done.returncode == 2 and "nope" in done.stderr and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site.")]


def test_a_score_table_opens_too(tmp_path: Path) -> None:
    table = tmp_path / "scores.parquet"
    pl.DataFrame(
        {
            "sample_id": ["a", "a", "b", "b"],
            "rollout_idx": [0, 1, 0, 1],
            "score": [1.0, 0.0, 1.0, 1.0],
        }
    ).write_parquet(table)
    result = build_site([table], tmp_path / "site")
    assert result.samples == 2 and result.rollouts == 4
    meta, _ = _index(tmp_path / "site")
    assert any("no completions" in n for n in meta["runs"][0]["notes"])


def test_assets_ship_as_package_data(site: Path) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["curate.view"]
    package = ROOT / "curate" / "view"  # package-data patterns are relative to it
    shipped = {p.name for pattern in patterns for p in package.glob(pattern)}
    assert shipped == set(ASSETS)
    assert (site / MARKER).is_file() and (site / "assets" / "view.js").is_file()
    # The page runs only its own files: a CSP without inline script, nothing remote.
    page = (site / "index.html").read_text()
    assert "script-src 'self'" in page and "unsafe-inline" not in page
    assert "http://" not in page and "https://" not in page
    script = (site / "assets" / "view.js").read_text()
    assert "innerHTML" not in script and "eval(" not in script and "fetch(" not in script


def test_open_hands_the_page_to_the_default_browser(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", samples=3, runs=2)
    seen = tmp_path / "opened.txt"
    fake = tmp_path / "fake-browser.sh"
    fake.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}\n')
    fake.chmod(0o755)
    done = curate("view", run, "-o", tmp_path / "site", "--open", env={"BROWSER": str(fake)})
    assert done.returncode == 0, done.stderr
    assert seen.read_text() == (tmp_path / "site" / "index.html").resolve().as_uri()
    assert "wrote" in done.stdout and "MB" in done.stdout


def test_suspect_flags_on_a_run_the_report_does_not_check_unasked(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from curate.analysis import suspects

    run = write_run(tmp_path / "run", samples=12, runs=4)
    monkeypatch.setattr(suspects, "AUTO_CHECK_ROLLOUTS", 10)  # this run is "large"
    build_site([run], tmp_path / "site")
    meta, table = _index(tmp_path / "site")
    summary = meta["runs"][0]
    assert summary["report"]["suspect_labels"]["count"] is None  # as `curate report` says
    assert all(row["text"] != "null" for row in summary["headline"])
    flagged = suspects.load_suspects(run).count
    assert flagged and sum(table["runs"][0]["suspect"]) == flagged
    assert any(f"{flagged:,} samples flagged" in note for note in summary["notes"])


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        # Each way `curate eval` builds a prompt: text, a template over fields, messages.
        ({"prompt_field": "question", "mode": "chat"}, [["user", "What is 2 + 2?"]]),
        ({"prompt_field": "question", "mode": "completion"}, "What is 2 + 2?"),
        (
            {"prompt_field": "question", "mode": "chat", "system": "Be brief."},
            [["system", "Be brief."], ["user", "What is 2 + 2?"]],
        ),
        ({"template": "Q: {question}\nA:", "mode": "completion"}, "Q: What is 2 + 2?\nA:"),
        (
            {"messages_field": "messages", "mode": "chat"},
            [["system", "You add."], ["user", "What is 2 + 2?"], ["assistant", "4"]],
        ),
    ],
    ids=["chat-text", "completion-text", "chat-system", "template", "messages"],
)
def test_the_prompt_is_shown_as_each_layout_builds_it(
    tmp_path: Path, layout: dict[str, Any], expected: Any
) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest({"model": "m", "answer_field": "answer", **layout})
    messages = [
        {"role": "system", "content": "You add."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    store.write_samples(
        pl.DataFrame(
            {
                "sample_id": ["a"],
                "question": ["What is 2 + 2?"],
                "messages": [messages],
                "answer": [{"value": 4, "unit": None}],  # a reference that is not text
            }
        )
    )
    store.append(
        pl.DataFrame({"sample_id": ["a", "a"], "rollout_idx": [0, 1], "score": [1.0, 0.0]})
    )
    build_site([store.run_dir], tmp_path / "site")
    _, items = read_call(tmp_path / "site" / "data" / "chunk-0.js")
    assert items[0]["p"] == [expected]
    assert json.loads(items[0]["ref"][0][1]) == {"value": 4, "unit": None}
