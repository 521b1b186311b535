"""MMLU-Pro: up to ten options, the answer as a letter and as an index.

TIGER-Lab/MMLU-Pro stores `question_id` (int), `question`, `options` (a list of up to
10 strings), `answer` (a letter, "A".."J"), `answer_index` (int), `cot_content`,
`category` and `src`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout, index_letter, key_letter, render_choices


class MMLUPro(Layout):
    name = "mmlu-pro"
    family = "multiple choice"
    sets = "MMLU-Pro"
    expects = "question: str, options: list[str] (<= 10), answer: letter, answer_index: int"
    grader = "choice"
    prompt_from = "question + lettered options (A-J)"
    reference_from = "answer letter (answer_index if it is missing)"
    also = ("options",)
    id_fields = ("question_id", "id")

    def matches(self, cols: Columns) -> bool:
        return (
            cols.is_text("question")
            and cols.is_text_list("options")
            and cols.is_int("answer_index")
        )

    def prompt_field(self, cols: Columns) -> str | None:
        return "question"

    def answer_field(self, cols: Columns) -> str:
        return "answer"

    def text(self, row: Mapping[str, Any]) -> str | None:
        return render_choices(row["question"], list(row["options"] or []))

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        letter = key_letter(row.get(answer_field))
        if letter is None:
            letter = index_letter(row.get("answer_index"), len(row.get("options") or []))
        return letter if letter is not None else row.get(answer_field)


LAYOUT = MMLUPro()
