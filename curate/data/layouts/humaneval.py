"""HumanEval: a function signature with its docstring, tests and an entry point.

openai/openai_humaneval stores `task_id`, `prompt`, `canonical_solution`, `test` (a
program defining `check(candidate)`) and `entry_point`; HumanEval+ keeps the fields.
The prompt is sent as it is; the code grader runs `test` and `check(entry_point)`.
"""

from __future__ import annotations

from curate.data.layouts.base import Columns, Layout


class HumanEval(Layout):
    name = "humaneval"
    family = "code"
    sets = "HumanEval, HumanEval+, MultiPL-E (Python)"
    expects = "task_id, prompt: str, test: str, entry_point: str"
    grader = "code"
    prompt_from = "prompt (signature + docstring)"
    reference_from = "test, run with check(entry_point)"
    also = ("entry_point",)
    id_fields = ("task_id", "id")

    def matches(self, cols: Columns) -> bool:
        return all(cols.is_text(name) for name in ("prompt", "test", "entry_point"))

    def prompt_field(self, cols: Columns) -> str | None:
        return "prompt"

    def answer_field(self, cols: Columns) -> str:
        return "test"


LAYOUT = HumanEval()
