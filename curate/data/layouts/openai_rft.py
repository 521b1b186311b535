"""OpenAI reinforcement fine-tuning JSONL: `messages` and `reference_answer`.

The grader config reads `{{ item.reference_answer }}`; `curate filter --format
openai-rft` writes `messages`, `reference_answer` and `sample_id`.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class OpenAIRFT(Layout):
    name = "openai-rft"
    family = "trainer"
    sets = "OpenAI RFT JSONL (curate filter --format openai-rft)"
    expects = "messages: list[{role, content}], reference_answer"
    grader = None
    prompt_from = "messages, as chat turns"
    reference_from = "reference_answer"
    id_fields = ("sample_id", "id")

    def matches(self, cols: Columns) -> bool:
        return cols.is_messages("messages") and cols.has("reference_answer")

    def messages_field(self, cols: Columns) -> str | None:
        return "messages"

    def answer_field(self, cols: Columns) -> str:
        return "reference_answer"


LAYOUT = OpenAIRFT()
