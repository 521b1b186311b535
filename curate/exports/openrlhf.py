"""`openrlhf`: JSON Lines for OpenRLHF's prompt datasets (PPO / REINFORCE++ / GRPO).

OpenRLHF's `PromptDataset` reads the prompt from `data[input_key]` and the reference
from `data[label_key]` (`--input_key`, default `input`; `--label_key`, default none),
and the reward bucket from `data["datasource"]`. With `--apply_chat_template` the
input may be a message list (or a string it wraps as one user message). So:

    input       the chat messages of `curate eval` (chat mode), or its raw text prompt
                (completion mode)
    label       the reference answer, as text
    datasource  the data set name
    sample_id, pass_rate, smoothed_pass_rate, variance, n_rollouts[, weight]

Train with `--input_key input --label_key label` (plus `--apply_chat_template` for
chat-mode runs); the command prints that line.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from curate.exports.base import (
    ExportBatch,
    ExportFormat,
    ExportResult,
    file_export,
    write_jsonl_lines,
)

INPUT_KEY = "input"
LABEL_KEY = "label"
DATASOURCE_KEY = "datasource"


def trainer_flags(batch: ExportBatch) -> str:
    """The OpenRLHF options that read this file."""
    flags = f"--input_key {INPUT_KEY} --label_key {LABEL_KEY}"
    return f"{flags} --apply_chat_template" if batch.conversational else flags


def openrlhf_records(batch: ExportBatch) -> list[dict[str, Any]]:
    batch.require_prompts("--format openrlhf")
    assert batch.answers is not None
    records = []
    for prompt, answer, source, sid, extra in zip(
        batch.trainer_prompts(),
        batch.answers,
        batch.data_sources(),
        batch.sample_ids,
        batch.extra_records(),
        strict=True,
    ):
        records.append(
            {
                INPUT_KEY: prompt,
                LABEL_KEY: answer,
                DATASOURCE_KEY: source,
                "sample_id": sid,
                **extra,
            }
        )
    return records


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    records = openrlhf_records(batch)
    return file_export(
        output,
        stack,
        lambda tmp: write_jsonl_lines(records, tmp),
        note=f"openrlhf: --prompt_data {output} {trainer_flags(batch)}",
    )


FORMAT = ExportFormat(
    name="openrlhf",
    description="OpenRLHF prompt JSONL: input, label, datasource (--input_key/--label_key)",
    output="jsonl",
    write=write,
)
