"""GSM8K: a word problem and a worked rationale that ends in a '#### N' line.

openai/gsm8k stores `question` and `answer` (strings); the reference is the number
after '####', read by the `gsm8k` reference extractor.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class GSM8K(Layout):
    name = "gsm8k"
    family = "math"
    sets = "GSM8K, GSM-Plus, GSM-Hard-style sets"
    expects = "question: str, answer: str ending in '#### N'"
    grader = None  # numeric: every reference is a number (the auto choice says so)
    prompt_from = "question"
    reference_from = "the number after '####'"

    def matches(self, cols: Columns) -> bool:
        return (
            cols.is_text("question")
            and cols.is_text("answer")
            and "####" in cols.text_value("answer")
        )

    def prompt_field(self, cols: Columns) -> str | None:
        return "question"

    def answer_field(self, cols: Columns) -> str:
        return "answer"


LAYOUT = GSM8K()
