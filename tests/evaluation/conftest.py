from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from curate.evaluation.options import EvalOptions
from tests.conftest import fake_eval_options


@pytest.fixture
def arithmetic_jsonl(tmp_path: Path) -> Path:
    """Twelve problems with pass rates 0, 1 and in between for the fake backend."""
    rows = []
    for i in range(12):
        rows.append({"id": f"q{i:02d}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def fake_answers(path: Path) -> dict[str, list[object]]:
    """question -> [answer, pass rate]: a third never, a third always, a third mixed."""
    answers: dict[str, list[object]] = {}
    for i, line in enumerate(path.read_text().splitlines()):
        row = json.loads(line)
        rate = (0.0, 1.0, 0.5)[i % 3]
        answers[row["question"]] = [row["answer"], rate]
    return answers


def fake_options(data: Path, out: Path, **fields: Any) -> EvalOptions:
    """EvalOptions for the fake backend answering `data` as `fake_answers` says."""
    return fake_eval_options(data, out, fake_answers(data), **fields)
