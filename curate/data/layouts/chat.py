"""Chat data: a message list (`messages`, `prompt` or `conversation`) and a reference
under one of the usual names.

The messages are sent as chat turns, never as one string. The reference is the first
of `REFERENCE_FIELDS` the file has (OpenAI's RFT files call it `reference_answer`).
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout

MESSAGE_FIELDS = ("messages", "prompt", "conversation", "conversations")
REFERENCE_FIELDS = (
    "reference_answer",
    "answer",
    "ground_truth",
    "solution",
    "target",
    "reference",
    "label",
    "expected_answer",
    "final_answer",
    "gold",
)


class Chat(Layout):
    name = "chat"
    family = "chat"
    sets = "chat-format RL sets (messages + a reference)"
    expects = "messages|prompt|conversation: list[{role, content}], answer|reference_answer|..."
    grader = None
    prompt_from = "the messages, as chat turns"
    reference_from = "the first of " + ", ".join(REFERENCE_FIELDS[:4]) + ", ..."
    id_fields = ("id", "uid", "uuid")

    def matches(self, cols: Columns) -> bool:
        messages = next((m for m in MESSAGE_FIELDS if cols.is_messages(m)), None)
        return messages is not None and cols.named(*REFERENCE_FIELDS) is not None

    def messages_field(self, cols: Columns) -> str | None:
        return next(m for m in MESSAGE_FIELDS if cols.is_messages(m))

    def answer_field(self, cols: Columns) -> str:
        answer = cols.named(*REFERENCE_FIELDS)
        assert answer is not None
        return answer


LAYOUT = Chat()
