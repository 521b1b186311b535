"""ARC, OpenBookQA, CommonsenseQA: options as a `{text, label}` struct and an `answerKey`.

allenai/ai2_arc stores `id`, `question`, `choices` (a struct of two lists, `text` and
`label`) and `answerKey` (a label such as "B", or "1".."4" in some rows); OpenBookQA
names its question `question_stem`; CommonsenseQA has five labelled options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout, key_letter, render_choices

QUESTION_FIELDS = ("question", "question_stem")


class ARC(Layout):
    name = "arc"
    family = "multiple choice"
    sets = "ARC, OpenBookQA, CommonsenseQA"
    expects = "question|question_stem: str, choices: {text: list, label: list}, answerKey: str"
    grader = "choice"
    prompt_from = "question + lettered choices.text"
    reference_from = "answerKey -> letter of its label"
    also = ("choices",)

    def matches(self, cols: Columns) -> bool:
        question = cols.named(*QUESTION_FIELDS)
        inner = cols.struct_fields("choices")
        return (
            question is not None
            and cols.is_text(question)
            and {"text", "label"} <= set(inner)
            and cols.is_text("answerKey")
        )

    def prompt_field(self, cols: Columns) -> str | None:
        return cols.named(*QUESTION_FIELDS)

    def answer_field(self, cols: Columns) -> str:
        return "answerKey"

    def text(self, row: Mapping[str, Any]) -> str | None:
        question = next(row[name] for name in QUESTION_FIELDS if name in row)
        choices = row.get("choices") or {}
        return render_choices(question, list(choices.get("text") or []))

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        key = row.get(answer_field)
        labels = (row.get("choices") or {}).get("label") or []
        letter = key_letter(key, labels)
        return letter if letter is not None else key


LAYOUT = ARC()
