"""MBPP: a one-sentence task and a list of assert lines.

google-research-datasets/mbpp stores `task_id` (int), `text`, `code`, `test_list` (a
list of assert strings), `test_setup_code` and `challenge_test_list`; the sanitized
set names the task `prompt` and adds `test_imports`. The prompt shows the first assert
so the model knows the function's name and signature, as MBPP's own prompts do; the
code grader runs every assert.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curate.data.layouts.base import Columns, Layout

TASK_FIELDS = ("text", "prompt")


class MBPP(Layout):
    name = "mbpp"
    family = "code"
    sets = "MBPP, MBPP sanitized, MBPP+"
    expects = "task_id, text|prompt: str, test_list: list[str]"
    grader = "code"
    prompt_from = "text + the first test as an example"
    reference_from = "test_list, every assert run"
    id_fields = ("task_id", "id")

    def matches(self, cols: Columns) -> bool:
        task = cols.named(*TASK_FIELDS)
        return task is not None and cols.is_text(task) and cols.is_text_list("test_list")

    def prompt_field(self, cols: Columns) -> str | None:
        return next(name for name in TASK_FIELDS if cols.has(name))

    def answer_field(self, cols: Columns) -> str:
        return "test_list"

    def text(self, row: Mapping[str, Any]) -> str | None:
        task = next(row[name] for name in TASK_FIELDS if name in row)
        tests = list(row.get("test_list") or [])
        if not tests:
            return str(task)
        return (
            f"{str(task).strip()}\n\nWrite a Python function for this task. "
            f"It must pass tests such as:\n\n{tests[0]}"
        )


LAYOUT = MBPP()
