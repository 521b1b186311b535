"""Every export reads back into `curate eval` with default options: the same prompts
(as chat messages) and the same references (as text) as the run it came from, sample by
sample, through what `curate eval` reads (`curate.data.samples` with its layout detection)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from curate.data.layouts import AUTO
from curate.data.samples import load_samples, prompts_by_id, references_by_id, resolve_fields
from curate.exports.base import answer_text
from curate.store.run_dir import RolloutStore

from .conftest import SYSTEM

FORMATS = {
    "jsonl": "out.jsonl",
    "parquet": "out.parquet",
    "verl": "out.parquet",
    "trl": "out.parquet",  # its Parquet twin; the saved dataset holds the same rows
    "openrlhf": "out.jsonl",
    "openai-rft": "out.jsonl",
}


def _ids_of(frame: pl.DataFrame, fmt: str) -> list[str]:
    """The original sample id of every exported row, in row order."""
    if fmt == "verl":
        return [str(e["sample_id"]) for e in frame["extra_info"].to_list()]
    return [str(s) for s in frame["sample_id"].to_list()]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_export_reads_back_with_the_same_prompts_and_references(
    cli, chat_run: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / FORMATS[fmt]
    result = cli("filter", chat_run, "--keep", "all", "--format", fmt, "-o", out)
    assert result.exit_code == 0, result.stderr
    samples = RolloutStore(chat_run).read_samples()
    assert samples is not None
    run_fields = resolve_fields(samples, id_field="sample_id")  # what the run read
    want_prompts = prompts_by_id(samples, run_fields, "chat", system=SYSTEM)
    want_refs = {s: answer_text(v) for s, v in references_by_id(samples, run_fields).items()}

    frame, fields = load_samples(out, layout=AUTO)  # curate eval's reader, its default options
    trainer = fmt not in ("jsonl", "parquet")  # the generic forms hold no system prompt
    got_prompts = prompts_by_id(frame, fields, "chat", system=None if trainer else SYSTEM)
    got_refs = references_by_id(frame, fields)
    ids = _ids_of(pl.read_parquet(out) if out.suffix == ".parquet" else pl.read_ndjson(out), fmt)
    assert sorted(ids) == sorted(want_prompts)
    for sid, (got_id, prompt) in zip(ids, got_prompts.items(), strict=True):
        assert list(prompt) == list(want_prompts[sid]), (fmt, sid)
        assert answer_text(got_refs[got_id]) == want_refs[sid], (fmt, sid)
