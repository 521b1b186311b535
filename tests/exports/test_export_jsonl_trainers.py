"""`--format openrlhf` and `--format openai-rft`: JSON Lines read with the keys the
trainers read, every row and field compared."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from .conftest import SYSTEM, assert_stats, chat_prompt, expected, read_jsonl, render


def openrlhf_preprocess(
    data: dict[str, Any],
    input_key: str = "input",
    label_key: str | None = None,
    apply_chat_template: Callable[..., str] | None = None,
) -> tuple[str, Any]:
    """OpenRLHF's `preprocess_data` (openrlhf/datasets/prompts_dataset.py), line for line:
    the prompt from data[input_key] (a string is wrapped as one user message when the
    chat template applies), the label from data[label_key]."""
    if apply_chat_template:
        chat = data[input_key]
        if isinstance(chat, str):
            chat = [{"role": "user", "content": chat}]
        prompt = apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    else:
        prompt = data[input_key]
    label = "" if label_key is None else data[label_key]
    return prompt, label


def _flags(stdout: str) -> dict[str, Any]:
    """The OpenRLHF options printed by `curate filter --format openrlhf`."""
    line = next(x for x in stdout.splitlines() if x.startswith("openrlhf:"))
    return {
        "input_key": re.search(r"--input_key (\S+)", line).group(1),  # type: ignore[union-attr]
        "label_key": re.search(r"--label_key (\S+)", line).group(1),  # type: ignore[union-attr]
        "apply_chat_template": "--apply_chat_template" in line,
    }


def test_openrlhf_chat_run(cli, chat_run: Path, outdir: Path, chat_tokenizer) -> None:
    out = outdir / "prompts.jsonl"
    result = cli("filter", chat_run, "--format", "openrlhf", "-o", out)
    assert result.exit_code == 0, result.stderr
    flags = _flags(result.stdout)
    assert flags == {"input_key": "input", "label_key": "label", "apply_chat_template": True}
    want = expected(chat_run)
    records = read_jsonl(out)
    assert [r["sample_id"] for r in records] == want.kept
    for record in records:
        sid = record["sample_id"]
        assert list(record)[:3] == ["input", "label", "datasource"]
        prompt, label = openrlhf_preprocess(
            record,
            flags["input_key"],
            flags["label_key"],
            chat_tokenizer.apply_chat_template,
        )
        assert prompt == render(chat_prompt(want.question[sid]))
        assert label == want.answer[sid]
        assert record.get("datasource", "default") == "math"  # the kind of task its grader scores
        assert_stats(record, want.stats[sid])


def test_openrlhf_completion_run_has_plain_input(cli, completion_run: Path, outdir: Path) -> None:
    out = outdir / "prompts.jsonl"
    result = cli("filter", completion_run, "--format", "openrlhf", "-o", out)
    assert result.exit_code == 0, result.stderr
    flags = _flags(result.stdout)
    assert flags["apply_chat_template"] is False
    want = expected(completion_run)
    records = read_jsonl(out)
    assert len(records) == len(want.kept) > 0
    for record in records:
        prompt, label = openrlhf_preprocess(record, flags["input_key"], flags["label_key"])
        assert prompt == f"{SYSTEM}\n\n{want.question[record['sample_id']]}"
        assert label == want.answer[record["sample_id"]]


def test_openai_rft_items(cli, chat_run: Path, outdir: Path) -> None:
    out = outdir / "rft.jsonl"
    result = cli("filter", chat_run, "--format", "openai-rft", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "{{ item.reference_answer }}" in result.stdout
    want = expected(chat_run)
    items = read_jsonl(out)
    assert [i["sample_id"] for i in items] == want.kept
    for item in items:
        sid = item["sample_id"]
        # The fine-tuning API's rules for an RFT item: a chat-completions message list
        # ending with a user message; `tools` is the only other reserved key; every other
        # key is grader data ({{ item.KEY }}).
        messages = item["messages"]
        assert all(set(m) == {"role", "content"} for m in messages)
        assert all(isinstance(m["content"], str) and m["content"] for m in messages)
        assert messages[-1]["role"] == "user"
        assert messages == chat_prompt(want.question[sid])
        assert "tools" not in item
        assert item["reference_answer"] == want.answer[sid]
        assert_stats(item, want.stats[sid])


def test_openai_rft_refuses_an_assistant_last_message(cli, tmp_path: Path, outdir: Path) -> None:
    scores = tmp_path / "scores.csv"
    pl.DataFrame(
        {"sample_id": ["a"] * 4, "rollout_idx": [0, 1, 2, 3], "score": [1.0, 0.0, 1.0, 0.0]}
    ).write_csv(scores)
    data = tmp_path / "data.jsonl"
    data.write_text(
        '{"sample_id": "a", "answer": "4", "messages": [{"role": "user", "content": "2+2?"},'
        ' {"role": "assistant", "content": "4"}]}\n'
    )
    out = outdir / "rft.jsonl"
    result = cli("filter", scores, "--data", data, "--format", "openai-rft", "-o", out)
    assert result.exit_code == 2
    assert "last message to be from the user" in result.stderr and "'a'" in result.stderr
    assert list(outdir.iterdir()) == []


@pytest.mark.parametrize("fmt", ["openrlhf", "openai-rft"])
def test_jsonl_trainer_formats_are_strict_json(cli, chat_run: Path, outdir: Path, fmt) -> None:
    out = outdir / "x.jsonl"
    assert cli("filter", chat_run, "--format", fmt, "--keep", "all", "-o", out).exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert "NaN" not in text and "ünïcode ✓" in text  # UTF-8 as is, no \\u escapes
    assert len(read_jsonl(out)) == 12
