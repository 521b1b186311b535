"""The grading pieces wired into `evaluate`: extraction and grader choice before the
engine starts, the early stop, trainer rewards with per-sample context and a score
range, the raw_score column (and old shards without it), and resume across versions."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from curate.backends.base import Generation, GenerationRequest
from curate.backends.fake import FakeBackend
from curate.errors import RunError, UsageError
from curate.evaluation.evaluate import evaluate
from curate.evaluation.preflight import apply_local_template, parse_score_range, shown_prompt
from curate.evaluation.progress import error_summary
from curate.evaluation.runner import (
    WATCH_MIN,
    WATCH_ROLLOUTS,
    GradingWatch,
    grade_generations,
    run_eval,
    sample_contexts,
)
from curate.evaluation.settings import extract_mode_of, score_differences
from curate.graders import GradeResult, get_grader
from curate.store.run_dir import RolloutStore
from curate.store.schema import rollout_schema
from tests.conftest import ROOT, TINY_MODEL, fake_eval_options

GSM8K = ROOT / "sample_data" / "gsm8k_layout.jsonl"


def _gsm8k_answers(path: Path = GSM8K) -> dict[str, list[object]]:
    """question -> [the final number, pass rate 0 / 1 / 0.5 in turn]."""
    answers: dict[str, list[object]] = {}
    for i, line in enumerate(path.read_text().splitlines()):
        row = json.loads(line)
        answers[row["question"]] = [row["answer"].split("#### ")[-1].replace(",", ""), i % 3 / 2]
    return answers


# -- the early stop -------------------------------------------------------------------------


def test_watch_stops_on_all_errors_or_one_dominant_message() -> None:
    watch = GradingWatch("g")
    watch.observe(["grader: boom"] * (WATCH_MIN - 1))
    assert watch.verdict() is None and not watch.decided  # too few to judge
    watch.observe(["grader: boom", "timeout"])  # a generation error is not the grader's
    reason = watch.verdict()
    assert reason is not None
    assert f"failed on all of the first {WATCH_MIN} graded rollouts: boom. Stopped" in reason
    assert watch.verdict() is None  # judged once

    dominant = GradingWatch("g")
    dominant.observe(["grader: same"] * 95 + [None] * 5)
    assert "failed on 95 of the first 100 graded rollouts: same." in (dominant.verdict() or "")

    healthy = GradingWatch("g")
    healthy.observe(["grader: a"] * 50 + ["grader: b"] * 45 + [None] * 5)
    assert healthy.verdict() is None and healthy.decided  # many errors, several causes

    streaming = GradingWatch("g")
    streaming.observe(["grader: boom"] * 20)
    assert streaming.verdict(chunk_done=False) is None  # a part-chunk flush: wait
    assert streaming.verdict(chunk_done=True) is not None


def test_run_eval_stops_after_the_first_chunk_and_keeps_it(tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        def grade_batch(self, completions, references):  # type: ignore[no-untyped-def]
            return [GradeResult(None, None, "KeyError: 'x'") for _ in completions]

        def close(self) -> None:
            pass

    backend = FakeBackend(answers={})
    store = RolloutStore(tmp_path / "run")
    prompts = {f"s{i:02d}": f"p{i}" for i in range(20)}
    with pytest.raises(RunError, match=r"all of the first 12 graded rollouts: KeyError: 'x'"):
        run_eval(
            store,
            backend=backend,
            grader=Broken(),
            prompts=prompts,
            references=dict.fromkeys(prompts, "1"),
            runs=4,
            chunk_size=3,
        )
    assert backend.calls == [3]  # the second chunk was never generated
    assert store.rollouts().height == 12

    # A chunk larger than WATCH_ROLLOUTS: judged on its first WATCH_ROLLOUTS rollouts.
    backend = FakeBackend(answers={})
    store = RolloutStore(tmp_path / "big")
    prompts = {f"s{i:03d}": f"p{i}" for i in range(100)}
    with pytest.raises(RunError, match=r"\(200 rollouts generated after them were not graded"):
        run_eval(
            store,
            backend=backend,
            grader=Broken(),
            prompts=prompts,
            references=dict.fromkeys(prompts, "1"),
            runs=4,
            chunk_size=100,
        )
    assert store.rollouts().height == WATCH_ROLLOUTS


def test_error_summary_lists_the_top_messages() -> None:
    counts = Counter({"grader: a": 7, "timeout": 12, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1})
    lines = error_summary(counts, top=3)
    assert lines == [
        "errors by message (7 distinct):",
        "  12  timeout",
        "   7  grader: a",
        "   1  b",
        "   4  (4 other messages)",
    ]
    assert error_summary({}) == []
    assert all(len(line) <= 80 for line in error_summary({"x" * 300: 1}))


# -- choosing and reading references ------------------------------------------------------


def test_default_options_grade_the_gsm8k_layout_like_bare_answers(tmp_path: Path) -> None:
    answers = _gsm8k_answers()
    first = evaluate(fake_eval_options(GSM8K, tmp_path / "gsm8k", answers, runs=4))
    assert first.settings.grader == "numeric" and first.result.errors == 0
    # The same questions with hand-extracted answers, under the same sample ids (the
    # ids seed the rollouts): every sample must score the same.
    samples = RolloutStore(tmp_path / "gsm8k").read_samples()
    assert samples is not None
    plain = tmp_path / "plain.jsonl"
    plain.write_text(
        "".join(
            json.dumps({"id": sid, "question": q, "answer": answers[q][0]}) + "\n"
            for sid, q in samples.select("sample_id", "question").iter_rows()
        )
    )
    evaluate(fake_eval_options(plain, tmp_path / "plain", answers, runs=4))
    rates = [
        dict(
            RolloutStore(tmp_path / name)
            .rollouts()
            .group_by("sample_id")
            .agg(pl.col("score").mean())
            .iter_rows()
        )
        for name in ("gsm8k", "plain")
    ]
    assert rates[0] == rates[1] and len(rates[0]) == 40
    assert {0.0, 1.0} < set(rates[0].values())


def test_announce_sees_the_preflight_before_the_engine_starts(tmp_path: Path) -> None:
    seen = []

    def announce(pf):  # type: ignore[no-untyped-def]
        seen.append(pf.lines())
        assert not (tmp_path / "run").exists()

    evaluate(
        fake_eval_options(GSM8K, tmp_path / "run", _gsm8k_answers(), runs=1),
        None,
        announce=announce,
    )
    assert seen and seen[0][0].startswith("layout: gsm8k (math; detected")
    assert seen[0][1].startswith("references: gsm8k (auto)")


def test_forced_modes_and_a_grader_given_explicitly(tmp_path: Path) -> None:
    answers = _gsm8k_answers()
    out = tmp_path / "run"
    outcome = evaluate(
        fake_eval_options(
            GSM8K,
            out,
            answers,
            runs=1,
            reference_extract="last-number",
            grader="numeric:abs_tol=0.5",
        )
    )
    manifest = RolloutStore(out).read_manifest()
    assert manifest["reference_extract"]["requested"] == "last-number"
    assert manifest["reference_extract"]["mode"] == "last-number"
    assert manifest["grader_reason"] == "numeric:abs_tol=0.5 (given with --grader)"
    assert outcome.result.errors == 0


def test_resume_compares_the_extractor_used_and_old_runs_mean_none(tmp_path: Path) -> None:
    answers = _gsm8k_answers()
    out = tmp_path / "run"
    opts = fake_eval_options(GSM8K, out, answers, runs=1, reference_extract="none")
    opts.grader = "exact"
    opts.max_bad_references = 1.0  # exact cannot use a rationale; this run knows
    evaluate(opts)
    # A run made before extraction existed: no `reference_extract` in its manifest.
    store = RolloutStore(out)
    manifest = store.read_manifest()
    del manifest["reference_extract"]
    store.write_manifest(manifest)
    opts.runs = 2
    assert evaluate(opts).result.rollouts == 40  # "none" == absent: resumes
    opts.runs, opts.reference_extract = 3, "gsm8k"
    with pytest.raises(UsageError, match="reference extraction 'none' -> 'gsm8k'"):
        evaluate(opts)
    # Asking for what auto chose changes nothing: the extractor used is compared.
    assert extract_mode_of({"requested": "auto", "mode": "gsm8k"}) == "gsm8k"
    assert not score_differences(
        {"reference_extract": {"requested": "auto", "mode": "gsm8k"}},
        {"reference_extract": {"requested": "gsm8k", "mode": "gsm8k"}},
    )
    assert score_differences({}, {"score_range": [0.0, 10.0]}) == [
        "score_range None -> [0.0, 10.0]"
    ]


# -- trainer rewards ----------------------------------------------------------------------


def test_verl_reward_gets_each_rows_fields_and_its_raw_score_is_kept(tmp_path: Path) -> None:
    rows = [
        {
            "question": f"What is {i} + {i}?",
            "data_source": "unit/arith",
            "reward_model": {"ground_truth": str(2 * i), "style": "rule"},
            "extra_info": {"index": i},
        }
        for i in range(6)
    ]
    data = tmp_path / "verl.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reward = tmp_path / "reward.py"
    reward.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    assert data_source == 'unit/arith' and isinstance(extra_info['index'], int)\n"
        "    return {'score': 10.0 if solution_str == ground_truth else 2.0,\n"
        "            'pred': solution_str}\n"
    )
    answers = {
        r["question"]: [r["reward_model"]["ground_truth"], (0.0, 1.0)[i % 2]]
        for i, r in enumerate(rows)
    }
    out = tmp_path / "run"
    outcome = evaluate(
        fake_eval_options(
            data, out, answers, runs=3, grader=f"verl:{reward}:compute_score", score_range=(0, 10)
        )
    )
    assert outcome.result.errors == 0, outcome.result.error_messages
    stored = RolloutStore(out).rollouts().sort("sample_id", "rollout_idx")
    assert sorted(set(stored["raw_score"].to_list())) == [2.0, 10.0]
    assert sorted(set(stored["score"].to_list())) == [0.2, 1.0]
    manifest = RolloutStore(out).read_manifest()
    assert manifest["score_range"] == [0, 10]
    assert manifest["reference_check"]["bad"] == 0
    assert manifest["reference_extract"]["mode"] == "none"


def test_grade_generations_passes_contexts_only_to_graders_that_read_them() -> None:
    seen: list[object] = []

    class WithContext:
        name = "ctx"
        needs_context = True

        def grade_batch(self, completions, references, contexts=None):  # type: ignore[no-untyped-def]
            seen.extend(contexts)
            return [GradeResult(1.0, None, raw_score=5.0) for _ in completions]

        def close(self) -> None:
            pass

    req = GenerationRequest(
        sample_id="a", prompt=[{"role": "user", "content": "q"}], n=2, first_run=0, seed=1
    )
    contexts = sample_contexts(pl.DataFrame({"sample_id": ["a"], "extra": [7]}), {"a": req.prompt})
    assert contexts == {"a": {"extra": 7, "prompt": req.prompt}}
    cols = grade_generations(
        [req], [[Generation(text="x"), Generation(text="y")]], {"a": "1"}, WithContext(), contexts
    )
    assert seen == [contexts["a"]] * 2 and cols["raw_score"] == [5.0, 5.0]
    numeric = get_grader("numeric")
    cols = grade_generations([req], [[Generation(text="1")]], {"a": "1"}, numeric, contexts)
    assert cols["score"] == [1.0] and cols["raw_score"] == [None]


# -- the store --------------------------------------------------------------------------------


def test_shards_written_before_raw_score_still_read(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    # A shard as the version before raw_score wrote it: every other column.
    before = {name: dtype for name, dtype in rollout_schema().items() if name != "raw_score"}
    old = (
        pl.DataFrame({"sample_id": ["a", "b"], "rollout_idx": [0, 0], "score": [1.0, 0.0]})
        .select(
            [
                pl.col(n) if n in ("sample_id", "rollout_idx", "score") else pl.lit(None).alias(n)
                for n in before
            ]
        )
        .cast(before)
    )
    old.write_parquet(store.rollouts_dir / "part-00000000000000000001-1-000000.parquet")
    store.append(
        pl.DataFrame({"sample_id": ["a"], "rollout_idx": [1], "score": [0.5], "raw_score": [5.0]})
    )
    frame = store.rollouts()
    assert frame["raw_score"].to_list() == [None, 5.0, None]
    assert frame.schema["raw_score"] == pl.Float64
    assert store.rollouts(["sample_id", "score"]).height == 3
    assert store.completed_pairs().height == 3


# -- small pieces -------------------------------------------------------------------------


def test_parse_score_range() -> None:
    assert parse_score_range("-1:1") == (-1.0, 1.0)
    assert parse_score_range("0:10") == (0.0, 10.0)
    for bad in ("1", "a:b", "1:1", "2:1", "0:inf", "nan:1"):
        with pytest.raises(UsageError, match="--score-range"):
            parse_score_range(bad)


def test_the_prompt_as_the_model_sees_it() -> None:
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    assert apply_local_template(str(TINY_MODEL), messages) == (
        "<s><|user|>What is 2 + 2?\n<|assistant|>"
    )
    assert apply_local_template("no/such/model", messages) is None
    text, how = shown_prompt(messages, "remote-model", "chat")
    assert text == "[user] What is 2 + 2?" and "chat messages" in how
    assert shown_prompt("Q: 2 + 2?\nA:", str(TINY_MODEL), "completion")[0] == "Q: 2 + 2?\nA:"


def test_adaptive_runs_summarise_their_errors(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    rows[0]["answer"] = "n/a"
    data = tmp_path / "one_bad.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outcome = evaluate(
        fake_eval_options(
            data,
            tmp_path / "run",
            _gsm8k_answers(),
            runs=4,
            adaptive=True,
            max_bad_references=0.05,
        )
    )
    messages = outcome.result.error_messages
    assert messages == Counter({"grader: reference is not a number: 'n/a'": 2})
