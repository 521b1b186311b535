"""TRL's prompt-only data: `prompt` (messages or text) and the reference as `solution`.

TRL's GRPOTrainer hands every column but `prompt` to the reward functions;
`trl.rewards.accuracy_reward` reads `solution`, and `curate filter --format trl`
writes it.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class TRL(Layout):
    name = "trl"
    family = "trainer"
    sets = "TRL GRPO data (curate filter --format trl)"
    expects = "prompt: list[{role, content}] or str, solution"
    grader = None
    prompt_from = "prompt (chat turns when a message list)"
    reference_from = "solution"
    id_fields = ("sample_id", "id")

    def matches(self, cols: Columns) -> bool:
        prompt = cols.is_messages("prompt") or cols.is_text("prompt")
        return prompt and cols.has("solution") and not cols.has("problem")

    def prompt_field(self, cols: Columns) -> str | None:
        return None if cols.is_messages("prompt") else "prompt"

    def messages_field(self, cols: Columns) -> str | None:
        return "prompt" if cols.is_messages("prompt") else None

    def answer_field(self, cols: Columns) -> str:
        return "solution"


LAYOUT = TRL()
