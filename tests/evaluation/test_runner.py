from __future__ import annotations

from functools import partial
from pathlib import Path

import polars as pl
import pytest

from curate.backends.base import GenerationRequest, SamplingConfig
from curate.backends.fake import FakeBackend
from curate.core.seeds import derive_seed
from curate.errors import UsageError
from curate.evaluation.evaluate import evaluate
from curate.evaluation.runner import EvalResult, plan_requests, run_eval
from curate.graders import get_grader
from curate.store.run_dir import RolloutStore
from tests.evaluation.conftest import fake_answers, fake_options


def test_derive_seed_is_stable_and_distinct() -> None:
    assert derive_seed(0, "a", 0) == derive_seed(0, "a", 0)
    seeds = {derive_seed(0, s, r) for s in "abcdef" for r in range(16)}
    assert len(seeds) == 6 * 16
    assert derive_seed(1, "a", 0) != derive_seed(0, "a", 0)
    assert all(0 <= s < 2**31 for s in seeds)


def test_plan_requests_covers_only_missing_runs_in_blocks() -> None:
    prompts = {"a": "pa", "b": "pb"}
    done = {("a", 0), ("a", 1), ("a", 4), ("b", 0)}
    reqs = plan_requests(prompts, 6, done, base_seed=7)
    got = [(r.sample_id, r.first_run, r.n) for r in reqs]
    assert got == [("a", 2, 2), ("a", 5, 1), ("b", 1, 5)]
    assert reqs[0].seed == derive_seed(7, "a", 2)


_opts = partial(fake_options, runs=4, chunk_size=5)


def _pairs(run: Path) -> pl.DataFrame:
    return RolloutStore(run).rollouts()


def test_eval_writes_every_pair_once_and_grades(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    outcome = evaluate(_opts(arithmetic_jsonl, run))
    assert outcome.result.rollouts == 12 * 4
    frame = _pairs(run)
    assert frame.height == 48
    assert frame.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    by = frame.group_by("sample_id").agg(pl.col("score").mean()).sort("sample_id")
    means = dict(by.rows())
    assert means["q00"] == 0.0 and means["q01"] == 1.0  # rate 0 and rate 1
    manifest = RolloutStore(run).read_manifest()
    assert manifest["grader"] == "numeric" and manifest["mode"] == "chat"
    assert manifest["sampling"]["temperature"] == 1.0
    samples = RolloutStore(run).read_samples()
    assert samples is not None and {"id", "question", "answer", "sample_id"} <= set(samples.columns)


def test_rerun_is_a_no_op_and_more_runs_add_only_new(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, run))
    first = _pairs(run).sort("sample_id", "rollout_idx")
    again = evaluate(_opts(arithmetic_jsonl, run))
    assert again.result.rollouts == 0 and again.result.skipped == 48
    more = evaluate(_opts(arithmetic_jsonl, run, runs=6))
    assert more.result.rollouts == 12 * 2
    frame = _pairs(run).sort("sample_id", "rollout_idx")
    assert frame.height == 72
    old = frame.filter(pl.col("rollout_idx") < 4)
    assert old.select("sample_id", "rollout_idx", "completion").equals(
        first.select("sample_id", "rollout_idx", "completion")
    )


def test_mismatched_settings_are_refused_unless_force_new(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    evaluate(_opts(arithmetic_jsonl, run))
    with pytest.raises(UsageError, match=r"temperature 1\.0 -> 0\.5"):
        evaluate(_opts(arithmetic_jsonl, run, temperature=0.5))
    with pytest.raises(UsageError, match="grader"):
        evaluate(_opts(arithmetic_jsonl, run, grader="exact"))
    fresh = evaluate(_opts(arithmetic_jsonl, run, temperature=0.5, force_new=True))
    assert fresh.result.rollouts == 48 and _pairs(run).height == 48


def test_failed_rollouts_are_error_rows_and_resume_fills_them(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    store = RolloutStore(tmp_path / "run")
    answers = {k: (v[0], float(v[1])) for k, v in fake_answers(arithmetic_jsonl).items()}
    prompts = {f"s{i}": q for i, q in enumerate(answers)}
    refs = {f"s{i}": a for i, (a, _) in enumerate(answers.values())}
    flaky = FakeBackend(answers=answers, fail=lambda r: "HTTP 503" if r.sample_id == "s3" else None)
    grader = get_grader("numeric")

    def run(backend: FakeBackend) -> EvalResult:
        return run_eval(
            store,
            backend=backend,
            grader=grader,
            prompts=prompts,
            references=refs,
            runs=3,
            sampling=SamplingConfig(),
            mode="completion",
            seed=0,
        )

    res = run(flaky)
    assert res.errors == 3
    frame = store.rollouts()
    errs = frame.filter(pl.col("error").is_not_null())
    assert errs["sample_id"].unique().to_list() == ["s3"]
    assert errs["score"].null_count() == 3  # an error is never a score
    res2 = run(FakeBackend(answers=answers))
    assert res2.rollouts == 3
    frame = store.rollouts()
    assert frame.height == len(prompts) * 3 and frame["error"].null_count() == frame.height


def test_grader_crash_is_recorded_as_error(tmp_path: Path) -> None:
    from curate.backends.base import Generation
    from curate.evaluation.runner import grade_generations

    class Boom:
        name = "boom"

        def grade_batch(self, completions, references):  # type: ignore[no-untyped-def]
            from curate.graders import GradeResult

            return [
                GradeResult(score=None, extracted=None, error="ValueError: bad")
                for _ in completions
            ]

        def close(self) -> None:
            pass

    req = GenerationRequest(sample_id="x", prompt="p", n=2, first_run=0, seed=1)
    cols = grade_generations(
        [req], [[Generation(text="1"), Generation(text="2")]], {"x": "1"}, Boom()
    )  # type: ignore[arg-type]
    assert cols["score"] == [None, None]
    assert all(e.startswith("grader:") for e in cols["error"])


def test_streaming_backend_results_are_flushed_as_they_arrive(tmp_path: Path) -> None:
    """A streaming backend's rollouts are written while later ones are still pending."""
    from curate.backends.base import Generation, Mode

    store = RolloutStore(tmp_path / "run")
    seen_on_disk: list[int] = []

    class Streamer:
        def info(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def generate(self, requests, sampling, mode):  # type: ignore[no-untyped-def]
            raise AssertionError("stream should be used")

        def stream(self, requests, sampling: SamplingConfig, mode: Mode):  # type: ignore[no-untyped-def]
            for i, req in enumerate(requests):
                seen_on_disk.append(len(store.shard_paths()))
                yield i, [Generation(text="1") for _ in range(req.n)]

    prompts = {f"s{i}": f"p{i}" for i in range(6)}
    refs = dict.fromkeys(prompts, "1")
    res = run_eval(
        store,
        backend=Streamer(),
        grader=get_grader("exact"),
        prompts=prompts,  # type: ignore[arg-type]
        references=refs,
        runs=2,
        sampling=SamplingConfig(),
        mode="completion",
        seed=0,
        chunk_size=2,
    )
    assert res.rollouts == 12 and res.shards == 3
    assert seen_on_disk == [0, 0, 1, 1, 2, 2]
    assert store.rollouts()["score"].to_list() == [1.0] * 12


def test_heartbeats_flush_buffered_rollouts_while_the_stream_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished rollout reaches disk even when nothing else arrives for a while."""
    import time as _time

    from curate.backends.base import Generation
    from curate.evaluation import runner

    monkeypatch.setattr(runner, "FLUSH_SECONDS", 0.05)
    store = RolloutStore(tmp_path / "run")
    on_disk_during_wait: list[int] = []

    class Slow:
        def info(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def generate(self, requests, sampling, mode):  # type: ignore[no-untyped-def]
            raise AssertionError("stream should be used")

        def stream(self, requests, sampling, mode):  # type: ignore[no-untyped-def]
            yield 0, [Generation(text="1")]
            for _ in range(5):  # the second request stalls: heartbeats only
                _time.sleep(0.03)
                yield None
            on_disk_during_wait.append(len(store.shard_paths()))
            yield 1, [Generation(text="1")]

    res = run_eval(
        store,
        backend=Slow(),
        grader=get_grader("exact"),  # type: ignore[arg-type]
        prompts={"a": "p", "b": "q"},
        references={"a": "1", "b": "1"},
        runs=1,
        sampling=SamplingConfig(),
        mode="completion",
        seed=0,
        chunk_size=100,
    )
    assert on_disk_during_wait == [1] and res.rollouts == 2
