"""Integer-answer competition sets: AIME, AMC-style sets with whole-number answers.

AI-MO/aimo-validation-aime stores `id`, `problem`, `solution`, `answer` and `url`;
Maxwell-Jia/AIME_2024 capitalises them (`ID`, `Problem`, `Solution`, `Answer`, an
integer). Either way every answer is a whole number: the numeric grader compares it.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout

PROBLEM_FIELDS = ("problem", "Problem", "question")
ANSWER_FIELDS = ("answer", "Answer")


def _whole(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.strip().lstrip("-").isdigit()


class AIME(Layout):
    name = "aime"
    family = "math"
    sets = "AIME (AI-MO, AIME_2024), integer-answer competition sets"
    expects = "problem|Problem: str, answer|Answer: int (or an integer string)"
    grader = "numeric"
    prompt_from = "problem"
    reference_from = "the integer answer"
    id_fields = ("id", "ID", "problem_id")

    def matches(self, cols: Columns) -> bool:
        problem = cols.named(*PROBLEM_FIELDS)
        answer = cols.named(*ANSWER_FIELDS)
        if problem is None or answer is None or not cols.is_text(problem):
            return False
        if cols.has("level") or cols.has("subject") or cols.has("type"):
            return False  # MATH's fields: its answers are not all integers
        if cols.is_int(answer):
            return True
        return cols.is_text(answer) and _whole(cols.first.get(answer))

    def prompt_field(self, cols: Columns) -> str | None:
        return cols.named(*PROBLEM_FIELDS)

    def answer_field(self, cols: Columns) -> str:
        answer = cols.named(*ANSWER_FIELDS)
        assert answer is not None
        return answer


LAYOUT = AIME()
