"""OpenRLHF's prompt data: `input` (messages or text) and `label`.

OpenRLHF reads the prompt from `--input_key` and the reference from `--label_key`;
`curate filter --format openrlhf` writes `input`, `label` and `datasource`. A message
list in `input` is sent as chat turns (OpenRLHF's --apply_chat_template).
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class OpenRLHF(Layout):
    name = "openrlhf"
    family = "trainer"
    sets = "OpenRLHF prompt JSONL (curate filter --format openrlhf)"
    expects = "input: list[{role, content}] or str, label"
    grader = None
    prompt_from = "input (chat turns when a message list)"
    reference_from = "label"
    id_fields = ("sample_id", "id")

    def matches(self, cols: Columns) -> bool:
        if not cols.has("label"):
            return False
        return cols.is_messages("input") or (cols.is_text("input") and cols.has("datasource"))

    def prompt_field(self, cols: Columns) -> str | None:
        return None if cols.is_messages("input") else "input"

    def messages_field(self, cols: Columns) -> str | None:
        return "input" if cols.is_messages("input") else None

    def answer_field(self, cols: Columns) -> str:
        return "label"


LAYOUT = OpenRLHF()
