r"""MATH and its derivatives: a problem, and an `answer` or a solution with a \boxed{}.

hendrycks MATH stores `problem`, `level`, `type` and `solution` (the answer is the
solution's last \boxed{}); MATH-500 adds `answer`, `subject` and `unique_id`;
NuminaMath keeps `problem` and `solution`. Answers such as `\$5`, `50\%`, `\text{(C)}`
or `10\text{ cm}` are compared by math-verify.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class MATH(Layout):
    name = "math"
    family = "math"
    sets = "MATH, MATH-500, NuminaMath, DeepScaleR"
    expects = "problem: str, answer: str or solution: str with \\boxed{}"
    grader = None  # numeric when every answer is a number, else math
    prompt_from = "problem"
    reference_from = "answer, else the solution's last \\boxed{}"
    id_fields = ("unique_id", "id", "problem_id")

    def matches(self, cols: Columns) -> bool:
        if not cols.is_text("problem"):
            return False
        if cols.has("answer") and (cols.is_text("answer") or cols.is_int("answer")):
            return True
        return cols.is_text("solution") and "\\boxed" in cols.text_value("solution")

    def prompt_field(self, cols: Columns) -> str | None:
        return "problem"

    def answer_field(self, cols: Columns) -> str:
        return "answer" if cols.has("answer") else "solution"


LAYOUT = MATH()
