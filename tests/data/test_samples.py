from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from curate.data.samples import (
    assign_ids,
    build_prompts,
    load_dataset,
    load_samples,
    prompts_by_id,
    references_by_id,
    resolve_fields,
)
from curate.errors import InputError, UsageError


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_common_field_names_are_recognised(tmp_path: Path) -> None:
    frame = load_dataset(_write(tmp_path / "d.jsonl", [{"problem": "1+1", "solution": "2"}]))
    fields = resolve_fields(frame)
    assert (fields.prompt_field, fields.answer_field, fields.id_field) == (
        "problem",
        "solution",
        None,
    )


def test_messages_are_detected_and_system_prepended(tmp_path: Path) -> None:
    rows = [{"messages": [{"role": "user", "content": "hi"}], "answer": "x"}]
    frame = load_dataset(_write(tmp_path / "d.jsonl", rows))
    fields = resolve_fields(frame)
    assert fields.messages_field == "messages"
    frame = assign_ids(frame, fields)
    prompts = build_prompts(frame, fields, "chat", system="be brief")
    assert prompts[0] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    with pytest.raises(UsageError):
        build_prompts(frame, fields, "completion")


def test_template_and_completion_mode(tmp_path: Path) -> None:
    frame = load_dataset(_write(tmp_path / "d.jsonl", [{"a": 2, "b": 3, "answer": "5"}]))
    fields = resolve_fields(frame, template="Add {a} and {b}.")
    assert build_prompts(frame, fields, "completion") == ["Add 2 and 3."]
    assert build_prompts(frame, fields, "chat") == [[{"role": "user", "content": "Add 2 and 3."}]]
    with pytest.raises(InputError, match="missing field"):
        resolve_fields(frame, template="{nope}")


def test_content_hash_ids_are_stable_under_reordering(tmp_path: Path) -> None:
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(5)]
    a = load_dataset(_write(tmp_path / "a.jsonl", rows))
    b = load_dataset(_write(tmp_path / "b.jsonl", [*reversed(rows), rows[0]]))
    fa, fb = resolve_fields(a), resolve_fields(b)
    ids_a = dict(zip(assign_ids(a, fa)["question"], assign_ids(a, fa)["sample_id"], strict=True))
    ib = assign_ids(b, fb)
    for q, sid in zip(ib["question"][:5], ib["sample_id"][:5], strict=True):
        assert ids_a[q] == sid
    assert ib["sample_id"][5] == ids_a["q0"] + "-2"  # an identical row gets a suffix


def test_id_field_duplicates_and_missing_columns_are_input_errors(tmp_path: Path) -> None:
    frame = load_dataset(
        _write(
            tmp_path / "d.jsonl",
            [{"id": 1, "question": "a", "answer": "1"}, {"id": 1, "question": "b", "answer": "2"}],
        )
    )
    with pytest.raises(InputError, match="duplicate"):
        assign_ids(frame, resolve_fields(frame))
    with pytest.raises(InputError, match="no answer column"):
        resolve_fields(pl.DataFrame({"question": ["q"]}))
    with pytest.raises(InputError, match="no prompt column"):
        resolve_fields(pl.DataFrame({"answer": ["q"]}))
    with pytest.raises(InputError, match="no such file"):
        load_dataset(tmp_path / "missing.jsonl")


def test_prompts_and_references_keyed_by_sample_id(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "question": "1+1", "answer": "2"},
        {"id": "b", "question": "2+2", "answer": "4"},
        {"id": "c", "question": "3+3", "answer": "6"},
    ]
    frame, fields = load_samples(_write(tmp_path / "d.jsonl", rows), limit=2, id_field="id")
    assert frame["sample_id"].to_list() == ["a", "b"]
    assert references_by_id(frame, fields) == {"a": "2", "b": "4"}
    assert prompts_by_id(frame, fields, "completion") == {"a": "1+1", "b": "2+2"}
    chat = prompts_by_id(frame, fields, "chat", system="be brief")
    assert chat["b"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+2"},
    ]
