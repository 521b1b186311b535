"""`--grader r3` in the run loop (curate/evaluation/r3.py) with a fake prefill: groups graded
at once, identical reasoning prefilled once, certainties stored beside the rollouts, a
resume that prefills only new rollouts, and the refusals. The real engine and server:
tests/evaluation/test_r3_vllm.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest

from curate.backends.base import Mode
from curate.backends.fake import FakeBackend
from curate.backends.prefill import PrefillItem, PrefillResult
from curate.errors import UsageError
from curate.evaluation.evaluate import evaluate
from curate.evaluation.options import EvalOptions
from curate.evaluation.runner import GRADER_ERROR_PREFIX, run_eval
from curate.graders import get_grader
from curate.store.certainty import append_certainties, read_certainties
from curate.store.run_dir import RolloutStore

PROMPTS = {"s0": "What is 2+2?", "s1": "What is 3+5?", "s2": "Say hi"}
REFERENCES = {"s0": "4", "s1": "8", "s2": "hello"}
ANSWERS = {"What is 2+2?": ("4", 0.5), "What is 3+5?": ("8", 0.5), "Say hi": ("hello", 1.0)}


@dataclass
class PrefillFake(FakeBackend):
    """The fake backend, plus a prefill: each reference character is a token, sure
    (0.99) except the first, which is likely (0.9) after a completion equal to the
    reference and unlikely (0.1) otherwise."""

    items: list[PrefillItem] = field(default_factory=list)
    too_long: str | None = None  # a sample whose prefill does not fit

    def reference_logprobs(self, items: Sequence[PrefillItem], mode: Mode) -> list[PrefillResult]:
        self.items.extend(items)
        out = []
        for item in items:
            if self.too_long is not None and item.prompt == PROMPTS[self.too_long]:
                out.append(PrefillResult(error="prefill: 900 tokens do not fit (512)"))
                continue
            right = item.context.rstrip("\n") == item.target
            first = math.log(0.9 if right else 0.1)
            logprobs = (first, *[math.log(0.99)] * (len(item.target) - 1))
            out.append(PrefillResult(tuple(item.target), logprobs, tokens_in=30))
        return out


def _run(store: RolloutStore, backend: FakeBackend, runs: int = 6):  # type: ignore[no-untyped-def]
    return run_eval(
        store,
        backend=backend,
        grader=get_grader("r3"),
        prompts=PROMPTS,
        references=REFERENCES,
        runs=runs,
        seed=3,
    )


def test_groups_are_graded_with_the_model_and_stored(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    backend = PrefillFake(answers=ANSWERS)
    result = _run(store, backend)
    rollouts = store.rollouts()
    assert rollouts["error"].null_count() == rollouts.height == 18
    right = rollouts.filter(pl.col("completion") == pl.col("sample_id").replace(REFERENCES))
    wrong = rollouts.filter(pl.col("completion") != pl.col("sample_id").replace(REFERENCES))
    assert right.height and wrong.height
    assert right["score"].min() > wrong["score"].max()  # type: ignore[operator]
    assert all(
        math.isclose(math.exp(r), s)
        for r, s in zip(rollouts["raw_score"], rollouts["score"], strict=True)
    )
    # s2 always answers right: no spread, one score for all (no signal, variance 0).
    assert rollouts.filter(pl.col("sample_id") == "s2")["score"].n_unique() == 1
    # One prefill per distinct reasoning of a sample, counted with its tokens.
    distinct = rollouts.select("sample_id", "completion").unique().height
    assert result.prefills == len(backend.items) == distinct
    assert result.prefill_tokens == 30 * distinct
    stored = read_certainties(store.run_dir)
    assert stored.height == 18 and stored["tokens"][0].to_list() == list(REFERENCES["s0"])


def test_a_resume_prefills_only_new_rollouts_and_grades_them_with_the_group(
    tmp_path: Path,
) -> None:
    store = RolloutStore(tmp_path / "run")
    flaky = PrefillFake(answers=ANSWERS, fail=lambda r: "HTTP 503" if r.sample_id == "s1" else None)
    _run(store, flaky)
    before = store.rollouts().filter(pl.col("error").is_null())
    assert set(before["sample_id"]) == {"s0", "s2"}
    again = PrefillFake(answers=ANSWERS)
    result = _run(store, again)
    assert {item.prompt for item in again.items} == {PROMPTS["s1"]}
    assert result.rollouts == 6
    after = store.rollouts()
    kept = after.filter(pl.col("sample_id").is_in(["s0", "s2"]))
    assert kept.select("sample_id", "rollout_idx", "score").equals(
        before.select("sample_id", "rollout_idx", "score")
    )
    # A third call has nothing to do and prefills nothing.
    idle = PrefillFake(answers=ANSWERS)
    assert _run(store, idle).prefills == 0 and not idle.items


def test_a_certainty_without_its_rollout_is_not_part_of_the_group(tmp_path: Path) -> None:
    """A run killed between the certainty shard and the rollout shard: the orphan row
    is ignored and the re-generated rollout scored afresh."""
    store = RolloutStore(tmp_path / "run")
    orphan = pl.DataFrame(
        {
            "sample_id": ["s0"] * 6,
            "rollout_idx": list(range(6)),
            "tokens": [["4"]] * 6,
            "logprobs": [[-50.0]] * 6,
            "tokens_in": [30] * 6,
        }
    )
    append_certainties(store.run_dir, orphan)
    _run(store, PrefillFake(answers=ANSWERS))
    s0 = store.rollouts().filter(pl.col("sample_id") == "s0")
    assert s0["score"].min() > 0.05  # type: ignore[operator]
    assert (
        read_certainties(store.run_dir)
        .filter(pl.col("sample_id") == "s0")["logprobs"]
        .list.first()
        .max()
        > -50
    )  # type: ignore[operator]


def test_a_prefill_that_fails_is_a_grader_error_row(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    _run(store, PrefillFake(answers=ANSWERS, too_long="s1"))
    rows = store.rollouts()
    errors = rows.filter(pl.col("sample_id") == "s1")["error"].to_list()
    assert errors == [f"{GRADER_ERROR_PREFIX}prefill: 900 tokens do not fit (512)"] * 6
    assert rows.filter(pl.col("sample_id") != "s1")["error"].null_count() == 12


def test_a_backend_without_prefill_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--grader r3 reads prompt log-probabilities"):
        _run(RolloutStore(tmp_path / "run"), FakeBackend(answers=ANSWERS))


@pytest.mark.parametrize("extra", [{"adaptive": True}, {"deepen": 2, "deepen_to": 16}])
def test_runs_that_grow_graded_groups_are_refused(tmp_path: Path, extra: dict) -> None:  # type: ignore[type-arg]
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "question": "q", "answer": "x"}\n')
    opts = EvalOptions(data=data, model="fake", backend="fake", grader="r3", out=tmp_path / "o")
    for key, value in extra.items():
        setattr(opts, key, value)
    with pytest.raises(UsageError, match="--grader r3 grades each sample"):
        evaluate(opts)


def test_curate_grade_refuses_r3(tmp_path: Path) -> None:
    from curate.evaluation.regrade import RegradeOptions, regrade

    opts = RegradeOptions(source=tmp_path / "run", out=tmp_path / "out", grader="r3")
    with pytest.raises(UsageError, match="grade with r3 in curate eval"):
        regrade(opts)
    assert not (tmp_path / "out").exists()


def test_stored_certainties_of_another_tokenizer_stop_the_run(tmp_path: Path) -> None:
    """A resume whose stored certainties have another number of reference tokens."""
    from curate.errors import RunError

    store = RolloutStore(tmp_path / "run")
    _run(store, PrefillFake(answers=ANSWERS), runs=3)
    frame = read_certainties(store.run_dir).with_columns(
        pl.col("tokens").list.concat(pl.lit(["x"])), pl.col("logprobs").list.concat(pl.lit([0.0]))
    )
    append_certainties(store.run_dir, frame)
    with pytest.raises(RunError, match="another model or tokenizer"):
        _run(store, PrefillFake(answers=ANSWERS), runs=6)
