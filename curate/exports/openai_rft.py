"""`openai-rft`: JSON Lines for OpenAI reinforcement fine-tuning.

Each line is one training item: `messages` in the chat-completions format, ending
with a user message (the model writes the reply that the grader scores). Any other
key of the item is available to graders as `{{ item.KEY }}`; curate writes:

    messages          the chat messages of `curate eval` ({role, content})
    reference_answer  the reference, as text: `"reference": "{{ item.reference_answer }}"`
    sample_id, pass_rate, smoothed_pass_rate, variance, n_rollouts[, weight]
    every column of the input under its own name (`input_NAME` where one of the keys
    above has it): `{{ item.entry_point }}`, `{{ item.subject }}`, ...
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from curate.errors import InputError
from curate.exports.base import (
    ExportBatch,
    ExportFormat,
    ExportResult,
    carried_note,
    chat_messages,
    file_export,
    write_jsonl_lines,
)
from curate.exports.columns import Carried, Role

ANSWER_KEY = "reference_answer"
ABSORBS: dict[str, tuple[Role, ...]] = {"messages": ("messages",), ANSWER_KEY: ("answer",)}


def rft_carried(batch: ExportBatch) -> list[Carried]:
    return batch.carried(ABSORBS, ["messages", ANSWER_KEY, "sample_id", *batch.extra_columns()])


def rft_records(batch: ExportBatch) -> list[dict[str, Any]]:
    batch.require_prompts("--format openai-rft")
    assert batch.chat_prompts is not None and batch.answers is not None
    records = []
    for messages, answer, sid, extra, inputs in zip(
        batch.chat_prompts,
        batch.answers,
        batch.sample_ids,
        batch.extra_records(),
        batch.input_records(rft_carried(batch)),
        strict=True,
    ):
        msgs = chat_messages(messages)
        if not msgs or msgs[-1]["role"] != "user":
            # The fine-tuning API rejects such an item; say which one instead.
            raise InputError(
                f"sample {sid!r}: OpenAI RFT needs the last message to be from the user "
                f"(it is {msgs[-1]['role'] if msgs else 'missing'!r})"
            )
        records.append({"messages": msgs, ANSWER_KEY: answer, "sample_id": sid, **extra, **inputs})
    return records


def write(batch: ExportBatch, output: Path, stack: ExitStack) -> ExportResult:
    records = rft_records(batch)
    result = file_export(
        output,
        stack,
        lambda tmp: write_jsonl_lines(records, tmp),
        note="openai-rft: graders read the answer as {{ item." + ANSWER_KEY + " }} "
        "and the model's reply as {{ sample.output_text }}",
    )
    result.notes.extend(carried_note("openai-rft", rft_carried(batch)))
    return result


FORMAT = ExportFormat(
    name="openai-rft",
    description="OpenAI reinforcement fine-tuning JSONL: messages + reference_answer",
    output="jsonl",
    write=write,
)
