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
    every column of the input under its own name (`input_NAME` where one of the keys
    above has it), for a remote reward server or custom reward function to read

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
    carried_note,
    file_export,
    write_jsonl_lines,
)
from curate.exports.columns import PROMPT_ROLES, Carried, Role

INPUT_KEY = "input"
LABEL_KEY = "label"
DATASOURCE_KEY = "datasource"
ABSORBS: dict[str, tuple[Role, ...]] = {INPUT_KEY: PROMPT_ROLES, LABEL_KEY: ("answer",)}


def openrlhf_carried(batch: ExportBatch) -> list[Carried]:
    own = [INPUT_KEY, LABEL_KEY, DATASOURCE_KEY, "sample_id", *batch.extra_columns()]
    return batch.carried(ABSORBS, own)


def trainer_flags(batch: ExportBatch) -> str:
    """The OpenRLHF options that read this file."""
    flags = f"--input_key {INPUT_KEY} --label_key {LABEL_KEY}"
    return f"{flags} --apply_chat_template" if batch.conversational else flags


def openrlhf_records(batch: ExportBatch) -> list[dict[str, Any]]:
    batch.require_prompts("--format openrlhf")
    assert batch.answers is not None
    records = []
    for prompt, answer, source, sid, extra, inputs in zip(
        batch.trainer_prompts(),
        batch.answers,
        batch.data_sources(),
        batch.sample_ids,
        batch.extra_records(),
        batch.input_records(openrlhf_carried(batch)),
        strict=True,
    ):
        records.append(
            {
                INPUT_KEY: prompt,
                LABEL_KEY: answer,
                DATASOURCE_KEY: source,
                "sample_id": sid,
                **extra,
                **inputs,
            }
        )
    return records


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    records = openrlhf_records(batch)
    result = file_export(
        output,
        stack,
        lambda tmp: write_jsonl_lines(records, tmp),
        note=f"openrlhf: --prompt_data {output} {trainer_flags(batch)}",
    )
    result.notes.extend(carried_note("openrlhf", openrlhf_carried(batch)))
    return result


FORMAT = ExportFormat(
    name="openrlhf",
    description="OpenRLHF prompt JSONL: input, label, datasource (--input_key/--label_key)",
    output="jsonl",
    write=write,
)
