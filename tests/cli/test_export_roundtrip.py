"""Every export format `curate filter` writes reads back into `curate eval` with
default options: the same prompts (as the model is sent them) and the same references
(as the grader reads them), sample by sample.

The class: each export format (jsonl, parquet, verl, trl, openrlhf, openai-rft) of runs
on data sets of different layouts (multiple choice with an integer index, GSM8K
rationales, a chat message list)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from curate.data.samples import build_prompts
from curate.evaluation.options import EvalOptions
from curate.evaluation.preflight import preflight
from tests.conftest import ROOT, Result

FORMATS = {
    "jsonl": "kept.jsonl",
    "parquet": "kept.parquet",
    "verl": "kept.parquet",
    "trl": "kept",
    "openrlhf": "kept.jsonl",
    "openai-rft": "kept.jsonl",
}


def _chat_file(path: Path) -> Path:
    rows = [
        {
            "id": f"q{i}",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"What is {i} + {i}?"},
            ],
            "answer": str(2 * i),
        }
        for i in range(5)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


SOURCES: dict[str, Callable[[Path], Path]] = {
    "mmlu": lambda tmp: ROOT / "sample_data" / "mmlu_layout.jsonl",
    "gsm8k": lambda tmp: ROOT / "sample_data" / "gsm8k_layout.jsonl",
    "chat": lambda tmp: _chat_file(tmp / "chat.jsonl"),
}


def _read_back(data: Path) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """(layout, prompts, references) by sample id, as `curate eval` reads `data` with
    default options (preflight is what eval runs before generating)."""
    checked = preflight(EvalOptions(data=data, model="fake-model", backend="fake"), "chat")
    try:
        prompts = build_prompts(checked.frame, checked.fields, "chat")
        ids = checked.frame["sample_id"].to_list()
        return (
            checked.fields.layout,
            dict(zip(ids, prompts, strict=True)),
            dict(checked.references),
        )
    finally:
        checked.close()


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_export_reads_back_with_the_same_prompts_and_references(
    fmt: str, source: str, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    if fmt == "trl":
        pytest.importorskip("datasets")
    data = SOURCES[source](tmp_path)
    run = tmp_path / "run"
    res = cli("eval", data, "--model", "fake-model", "--backend", "fake", "-n", 2, "--out", run)
    assert res.exit_code == 0, res.stderr
    out = tmp_path / FORMATS[fmt]
    res = cli("filter", run, "--format", fmt, "--keep", "all", "-o", out)
    assert res.exit_code == 0, res.stderr
    exported = out.with_suffix(".parquet") if fmt == "trl" else out

    _, prompts, references = _read_back(data)
    layout, prompts_back, references_back = _read_back(exported)
    assert set(prompts_back) == set(prompts)  # the run's sample ids survive the export
    assert prompts_back == prompts, layout
    assert references_back == references, layout
    # The CLI reads it with default options, and names the layout it recognised.
    res = cli("eval", exported, "--model", "fake-model", "--backend", "fake", "--dry-run")
    assert res.exit_code == 0, res.stderr
    assert res.stderr.startswith("layout: ")
