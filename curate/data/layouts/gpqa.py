"""GPQA: the correct answer and three incorrect answers in separate fields.

Idavidrein/gpqa stores `Question`, `Correct Answer`, `Incorrect Answer 1`..`3` and a
`Record ID` (plus explanations and metadata). The options are shuffled with a seed
taken from the question, so a sample always shows the same order and the correct
letter is spread over A-D across the set; the letter is what the grader compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout, render_choices, shuffled_options

QUESTION = "Question"
CORRECT = "Correct Answer"
WRONG = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def options_of(row: Mapping[str, Any]) -> tuple[list[str], str]:
    """(the options in the sample's fixed order, the correct letter)."""
    wrong = [str(row[name]) for name in WRONG if row.get(name) is not None]
    return shuffled_options(str(row[CORRECT]), wrong, str(row[QUESTION]))


class GPQA(Layout):
    name = "gpqa"
    family = "multiple choice"
    sets = "GPQA, and sets with correct and incorrect answer fields"
    expects = "Question: str, Correct Answer: str, Incorrect Answer 1..3: str"
    grader = "choice"
    prompt_from = "Question + the 4 answers shuffled per sample"
    reference_from = "letter of Correct Answer after the shuffle"
    also = WRONG
    id_fields = ("Record ID", "id")

    def matches(self, cols: Columns) -> bool:
        return all(cols.is_text(name) for name in (QUESTION, CORRECT, *WRONG))

    def prompt_field(self, cols: Columns) -> str | None:
        return QUESTION

    def answer_field(self, cols: Columns) -> str:
        return CORRECT

    def text(self, row: Mapping[str, Any]) -> str | None:
        options, _ = options_of(row)
        return render_choices(row[QUESTION], options)

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        if row.get(CORRECT) is None:
            return None
        return options_of(row)[1]


LAYOUT = GPQA()
