"""LiveCodeBench: contest problems with their public test cases as a JSON string.

livecodebench/code_generation_lite stores `question_title`, `question_content`,
`platform`, `question_id`, `contest_id`, `contest_date`, `starter_code`, `difficulty`,
`public_test_cases` (JSON: a list of {input, output, testtype}), `private_test_cases`
(compressed) and `metadata`. The public cases are run as stdin/stdout cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout

STDIO = "Read the input from standard input and print the answer to standard output."
CALL = "Complete the code below."


class LiveCodeBench(Layout):
    name = "livecodebench"
    family = "code"
    sets = "LiveCodeBench (code generation)"
    expects = "question_id, question_content: str, public_test_cases: JSON str"
    grader = "code"
    prompt_from = "question_content (+ starter_code)"
    reference_from = "public_test_cases"
    id_fields = ("question_id", "id")

    def matches(self, cols: Columns) -> bool:
        return cols.is_text("question_content") and cols.is_text("public_test_cases")

    def prompt_field(self, cols: Columns) -> str | None:
        return "question_content"

    def answer_field(self, cols: Columns) -> str:
        return "public_test_cases"

    def text(self, row: Mapping[str, Any]) -> str | None:
        question = str(row["question_content"]).strip()
        starter = str(row.get("starter_code") or "").strip()
        if starter:
            return f"{question}\n\n{CALL}\n\n```python\n{starter}\n```"
        return f"{question}\n\n{STDIO}"


LAYOUT = LiveCodeBench()
