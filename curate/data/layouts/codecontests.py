"""CodeContests: a description with public, private and generated stdin/stdout tests.

deepmind/code_contests stores `name`, `description`, `public_tests`, `private_tests`
and `generated_tests` (each a struct of two lists, `input` and `output`), `source`,
`difficulty` and `solutions`. The reference is the public and private tests together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout

STDIO = "Read the input from standard input and print the answer to standard output."
TEST_SETS = ("public_tests", "private_tests")


class CodeContests(Layout):
    name = "codecontests"
    family = "code"
    sets = "CodeContests"
    expects = "name, description: str, public_tests|private_tests: {input: list, output: list}"
    grader = "code"
    prompt_from = "description, with how the program is run"
    reference_from = "public_tests + private_tests"
    also = ("private_tests",)
    id_fields = ("name", "id")

    def matches(self, cols: Columns) -> bool:
        return cols.is_text("description") and {"input", "output"} <= set(
            cols.struct_fields("public_tests")
        )

    def prompt_field(self, cols: Columns) -> str | None:
        return "description"

    def answer_field(self, cols: Columns) -> str:
        return "public_tests"

    def text(self, row: Mapping[str, Any]) -> str | None:
        return f"{str(row['description']).strip()}\n\n{STDIO}"

    def reference(self, row: Mapping[str, Any], answer_field: str) -> Any:
        inputs: list[Any] = []
        outputs: list[Any] = []
        for name in TEST_SETS:
            tests = row.get(name) or {}
            inputs += list(tests.get("input") or [])
            outputs += list(tests.get("output") or [])
        return {"input": inputs, "output": outputs}


LAYOUT = CodeContests()
