"""APPS and TACO: a problem statement with stdin/stdout (or call-based) tests as JSON.

codeparrot/apps stores `problem_id`, `question`, `solutions` (JSON), `input_output`
(JSON with `inputs`, `outputs` and, for call-based problems, `fn_name`), `difficulty`,
`url` and `starter_code`; BAAI/TACO keeps those fields and adds tags and limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout

STDIO = "Read the input from standard input and print the answer to standard output."
CALL = "Complete the code below; the tests call it."


class APPS(Layout):
    name = "apps"
    family = "code"
    sets = "APPS, TACO"
    expects = "question: str, input_output: JSON str, starter_code: str"
    grader = "code"
    prompt_from = "question (+ starter_code), with how the program is run"
    reference_from = "input_output (stdin/stdout or call-based)"
    id_fields = ("problem_id", "id", "name")

    def matches(self, cols: Columns) -> bool:
        return cols.is_text("question") and cols.is_text("input_output")

    def prompt_field(self, cols: Columns) -> str | None:
        return "question"

    def answer_field(self, cols: Columns) -> str:
        return "input_output"

    def text(self, row: Mapping[str, Any]) -> str | None:
        question = str(row["question"]).strip()
        starter = str(row.get("starter_code") or "").strip()
        if starter:
            return f"{question}\n\n{CALL}\n\n```python\n{starter}\n```"
        return f"{question}\n\n{STDIO}"


LAYOUT = APPS()
