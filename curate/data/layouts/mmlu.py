"""MMLU: a question, its options as a list of strings, and the answer as an option index.

cais/mmlu stores `question` (string), `subject` (string), `choices` (list of 4 strings)
and `answer` (an integer class label, 0-3); MMLU-Redux and Global-MMLU keep the same
fields. An answer written as a letter ("C") is read too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout, index_letter, key_letter, render_choices


class MMLU(Layout):
    name = "mmlu"
    family = "multiple choice"
    sets = "MMLU, MMLU-Redux, Global-MMLU"
    expects = "question: str, choices: list[str], answer: int index (or letter)"
    grader = "choice"
    prompt_from = "question + lettered choices"
    reference_from = "answer index -> letter"
    also = ("choices",)

    def matches(self, cols: Columns) -> bool:
        if not (cols.is_text("question") and cols.is_text_list("choices")):
            return False
        return cols.is_int("answer") or (
            cols.is_text("answer") and key_letter(cols.first.get("answer")) is not None
        )

    def prompt_field(self, cols: Columns) -> str | None:
        return "question"

    def answer_field(self, cols: Columns) -> str:
        return "answer"

    def text(self, row: Mapping[str, Any]) -> str | None:
        return render_choices(row["question"], list(row["choices"] or []))

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        answer = row.get(answer_field)
        count = len(row.get("choices") or [])
        letter = index_letter(answer, count) if not isinstance(answer, str) else None
        if letter is None and isinstance(answer, str):
            letter = key_letter(answer)
        return letter if letter is not None else answer


LAYOUT = MMLU()
