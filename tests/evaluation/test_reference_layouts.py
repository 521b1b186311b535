"""On the real engine: the public data-set layouts evaluated with default
grading options score exactly like the same questions with hand-extracted answers.

sample_data/gsm8k_layout.jsonl (a worked rationale ending in `#### 1,331`) and
sample_data/math_layout.jsonl (a solution with `\\boxed{1331}`) are evaluated by
`evaluate` with default options on the tiny model (-n 4), and so is, for each, a file of
the same questions whose `answer` is the bare number. Rollouts are seeded by sample id,
so each comparison file carries the layout run's ids: the model then writes the same
completions, and any difference in a pass rate is a difference in grading.

One engine start: the session's vLLM engine stands in for the one `evaluate` opens.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.evaluation import evaluate as evaluate_module
from curate.evaluation.evaluate import evaluate
from curate.evaluation.options import EvalOptions
from curate.store.run_dir import RolloutStore
from tests.conftest import ROOT, TINY_MODEL

pytestmark = pytest.mark.slow

LAYOUTS = {
    "gsm8k": (ROOT / "sample_data" / "gsm8k_layout.jsonl", "question", "answer"),
    "boxed": (ROOT / "sample_data" / "math_layout.jsonl", "problem", "solution"),
}


@pytest.fixture
def shared_engine(vllm_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`evaluate` opens the session's engine instead of starting its own."""

    @contextlib.contextmanager
    def open_shared(name: str, model: str, options: object, *, seed: int = 0) -> Iterator[Any]:
        assert (name, model) == ("vllm", str(TINY_MODEL))
        yield vllm_backend

    monkeypatch.setattr(evaluate_module, "open_backend", open_shared)


def _final_number(question: str) -> str:
    """The answer by hand: the arithmetic in "What is A op B?"."""
    a, op, b = question.removeprefix("What is ").removesuffix("?").split()
    return str(int(a) + int(b) if op == "+" else int(a) - int(b) if op == "-" else 0)


def _pass_rates(run: Path, key: str) -> dict[str, float]:
    store = RolloutStore(run)
    samples = store.read_samples()
    assert samples is not None
    rows = store.rollouts().join(samples.select("sample_id", key), on="sample_id")
    assert rows["error"].null_count() == rows.height
    return dict(rows.group_by(key).agg(pl.col("score").mean()).iter_rows())


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layout_scores_like_hand_extracted_answers(
    layout: str, shared_engine: None, tmp_path: Path
) -> None:
    data, question_field, answer_field = LAYOUTS[layout]
    lines: list[str] = []
    outcome = evaluate(
        EvalOptions(data=data, model=str(TINY_MODEL), backend="vllm", runs=4, out=tmp_path / "a"),
        announce=lambda pf: lines.extend(pf.lines()),
    )
    assert outcome.settings.grader == "numeric"
    # The recognised layout first, then how its references are read.
    assert lines[0].startswith("layout: ")
    assert lines[1].startswith(f"references: {layout} (auto)")
    assert "in 40 of 40 references" in lines[1]
    manifest = RolloutStore(tmp_path / "a").read_manifest()
    assert manifest["reference_extract"]["mode"] == layout
    assert manifest["reference_check"]["bad"] == 0

    # The same questions, answered by hand, under the layout run's sample ids.
    samples = RolloutStore(tmp_path / "a").read_samples()
    assert samples is not None
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "".join(
            json.dumps({"id": sid, "question": q, "answer": _final_number(q)}) + "\n"
            for sid, q in samples.select("sample_id", question_field).iter_rows()
        )
    )
    evaluate(
        EvalOptions(data=plain, model=str(TINY_MODEL), backend="vllm", runs=4, out=tmp_path / "b")
    )
    layout_rates = _pass_rates(tmp_path / "a", question_field)
    hand_rates = _pass_rates(tmp_path / "b", "question")
    assert len(layout_rates) == 40
    assert layout_rates == hand_rates
    # The tiny model solves some of these and not others: the comparison has teeth.
    assert 0 < sum(layout_rates.values()) < 40
    # Printed for the record (pytest -s): the per-sample pass rates, as measured.
    rates = sorted(layout_rates.values())
    print(
        f"\n{layout}: mean pass rate {sum(rates) / len(rates):.3f}; per-sample rates "
        f"{[rates.count(v) for v in (0.0, 0.25, 0.5, 0.75, 1.0)]} at 0/.25/.5/.75/1; "
        f"answer field {answer_field!r}; identical to hand-extracted: "
        f"{layout_rates == hand_rates}"
    )
