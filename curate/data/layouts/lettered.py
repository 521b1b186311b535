"""Options written with their letters, "A) ...": AQuA-RAT and sets built like it.

deepmind/aqua_rat stores `question`, `options` (a list of strings "A)21", "B)21.5",
...), `rationale` and `correct` (the letter). The letters are taken off the options and
put back in the standard template, so every multiple-choice prompt looks the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import (
    LETTERS,
    Columns,
    Layout,
    key_letter,
    option_prefix,
    render_choices,
    strip_option_prefix,
)

OPTION_FIELDS = ("options", "choices")
ANSWER_FIELDS = ("correct", "answer", "answerKey", "label")


class Lettered(Layout):
    name = "lettered-options"
    family = "multiple choice"
    sets = "AQuA-RAT (options written 'A) ...')"
    expects = "question: str, options|choices: list['A) ...'], correct|answer: letter"
    grader = "choice"
    prompt_from = "question + the options re-lettered"
    reference_from = "the answer letter"
    also = OPTION_FIELDS

    def matches(self, cols: Columns) -> bool:
        options = cols.named(*OPTION_FIELDS)
        answer = cols.named(*ANSWER_FIELDS)
        if not (cols.is_text("question") and options and answer and cols.is_text_list(options)):
            return False
        first = cols.first.get(options) or []
        return (
            bool(first)
            and all(option_prefix(o) is not None for o in first)
            and cols.is_text(answer)
            and key_letter(cols.first.get(answer)) is not None
        )

    def prompt_field(self, cols: Columns) -> str | None:
        return "question"

    def answer_field(self, cols: Columns) -> str:
        answer = cols.named(*ANSWER_FIELDS)
        assert answer is not None
        return answer

    def text(self, row: Mapping[str, Any]) -> str | None:
        options = list(next(row[name] for name in OPTION_FIELDS if name in row) or [])
        if [option_prefix(o) for o in options] != list(LETTERS[: len(options)]):
            # Letters out of order: re-lettering would move the answer; keep them.
            return render_choices(row["question"], options, lettered=False)
        return render_choices(row["question"], [strip_option_prefix(o) for o in options])

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        letter = key_letter(row.get(answer_field))
        return letter if letter is not None else row.get(answer_field)


LAYOUT = Lettered()
