"""LiveCodeBench: contest problems with their public test cases as a JSON string.

livecodebench/code_generation_lite stores `question_title`, `question_content`,
`platform`, `question_id`, `contest_id`, `contest_date`, `starter_code`, `difficulty`,
`public_test_cases` (JSON: a list of {input, output, testtype}), `private_test_cases`
(compressed) and `metadata`. The public cases are run: stdin/stdout cases as they are;
LeetCode's functional cases (one JSON argument a line, `metadata.func_name`) as calls of
that function (or of `Solution().<func_name>`), the code grader's call-based layout.
"""

from __future__ import annotations

import json
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
    reference_from = "public_test_cases (stdin/stdout, or calls of func_name)"
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

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        tests = row.get(answer_field)
        calls = functional_calls(tests, row.get("metadata"))
        return calls if calls is not None else tests


def functional_calls(tests: object, metadata: object) -> dict[str, Any] | None:
    """Functional (LeetCode) cases as the code grader's call-based layout, or None when
    the cases are stdin/stdout (or unreadable: the grader's check then says why)."""
    try:
        cases = json.loads(tests) if isinstance(tests, str) else tests
        meta = json.loads(metadata) if isinstance(metadata, str) else metadata
        if not (isinstance(cases, list) and cases and isinstance(meta, dict)):
            return None
        if not all(isinstance(c, dict) and c.get("testtype") == "functional" for c in cases):
            return None
        inputs = [
            [json.loads(line) for line in str(c["input"]).split("\n") if line.strip()]
            for c in cases
        ]
        outputs = [json.loads(str(c["output"])) for c in cases]
    except (ValueError, KeyError, TypeError):
        return None
    name = meta.get("func_name")
    return {"fn_name": name, "inputs": inputs, "outputs": outputs} if name else None


LAYOUT = LiveCodeBench()
