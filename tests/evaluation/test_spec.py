"""The shared shapes of an evaluation: the `Evaluation` value the engine entry points
take, the backends' option schemas (validation, manifest record, CLI flags), the
policy's one round loop, and the registries by name."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from curate.backends.base import SamplingConfig
from curate.backends.fake import FakeBackend, FakeOptions
from curate.backends.openai_options import OpenAIOptions
from curate.backends.registry import backend_options, open_backend
from curate.backends.vllm_options import VllmOptions
from curate.errors import UsageError
from curate.evaluation.adaptive import (
    AdaptivePolicy,
    Observation,
    SampleState,
    replay,
    run_adaptive,
    run_rounds,
)
from curate.evaluation.evaluate import evaluate
from curate.evaluation.runner import run_eval
from curate.evaluation.spec import Evaluation
from curate.exports import FORMATS, get_format
from curate.graders import get_grader
from curate.store.run_dir import RolloutStore
from tests.evaluation.conftest import fake_answers, fake_options


def _evaluation(data: Path, **fields: object) -> Evaluation:
    answers = {k: (str(v[0]), float(v[1])) for k, v in fake_answers(data).items()}  # type: ignore[arg-type]
    prompts = {f"s{i}": q for i, q in enumerate(answers)}
    refs = {f"s{i}": a for i, (a, _) in enumerate(answers.values())}
    base = Evaluation(
        backend=FakeBackend(answers=answers),
        grader=get_grader("numeric"),
        prompts=prompts,
        references=refs,
        sampling=SamplingConfig(),
        mode="completion",
        runs=3,
    )
    return Evaluation(**{**base.__dict__, **fields})  # type: ignore[arg-type]


# -- one value for every entry point --------------------------------------------
def test_run_eval_takes_an_evaluation_or_its_fields(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    ev = _evaluation(arithmetic_jsonl)
    one = run_eval(RolloutStore(tmp_path / "a"), ev)
    two = run_eval(RolloutStore(tmp_path / "b"), **ev.__dict__)
    assert one.rollouts == two.rollouts == 12 * 3
    a = RolloutStore(tmp_path / "a").rollouts().drop("latency_s")
    b = RolloutStore(tmp_path / "b").rollouts().drop("latency_s")
    assert a.sort("sample_id", "rollout_idx").equals(b.sort("sample_id", "rollout_idx"))
    with pytest.raises(TypeError, match="not both"):
        run_eval(RolloutStore(tmp_path / "c"), ev, seed=1)


def test_adaptive_rounds_are_the_same_evaluation_with_targets(
    arithmetic_jsonl: Path, tmp_path: Path
) -> None:
    ev = _evaluation(arithmetic_jsonl, runs=99)  # the policy, not `runs`, sets the targets
    res = run_adaptive(RolloutStore(tmp_path / "run"), ev, AdaptivePolicy(max_runs=4))
    assert res.rounds >= 2 and res.spent <= 12 * 4
    assert ev.with_runs({"s0": 2}).runs == {"s0": 2} and ev.runs == 99
    with pytest.raises(TypeError, match="AdaptivePolicy"):
        run_adaptive(RolloutStore(tmp_path / "x"), ev)


# -- the round loop -------------------------------------------------------------
class _ListSource:
    """A source that hands out fixed sequences, the whole plan at once."""

    def __init__(self, sequences: Mapping[str, list[float]]) -> None:
        self.sequences = sequences
        self.seen = {sid: 0 for sid in sequences}

    def observe(self) -> Observation:
        states = {sid: SampleState.of(self.sequences[sid][:n]) for sid, n in self.seen.items()}
        return Observation(states, sum(self.seen.values()))

    def draw(self, plan: Mapping[str, int]) -> None:
        for sid, k in plan.items():
            self.seen[sid] += k


def test_any_source_runs_the_same_loop_as_replay() -> None:
    sequences = {"a": [1.0] * 8, "b": [0.0, 0.0, 1.0, 0.0], "c": [1.0, 0.0, 1.0]}
    policy = AdaptivePolicy(round_size=1, max_runs=4)
    source = _ListSource(sequences)
    rounds, last = run_rounds(policy, source)
    trace = replay(policy, sequences)
    assert rounds == trace.rounds
    assert source.seen == {sid: len(v) for sid, v in trace.outcomes.items()}
    assert last.spent == trace.rollouts
    assert run_rounds(policy, _ListSource(sequences), max_rounds=1)[0] == 1


# -- backend option schemas ----------------------------------------------------
def test_options_validate_and_record_what_was_given() -> None:
    assert OpenAIOptions().concurrency == 32 and OpenAIOptions().timeout == 120.0
    assert OpenAIOptions().record() == {"api_key_env": "OPENAI_API_KEY"}
    given = OpenAIOptions.parse({"concurrency": 32, "base_url": "http://h/v1"})
    assert given.record() == {
        "base_url": "http://h/v1",
        "concurrency": 32,
        "api_key_env": "OPENAI_API_KEY",
    }
    vllm = VllmOptions.parse({"dtype": "auto", "kv_cache_memory_gb": 0.25})
    assert vllm.record() == {"kv_cache_memory_gb": 0.25, "dtype": "auto"}
    assert VllmOptions(tensor_parallel_size=2).record() == {"tensor_parallel_size": 2}
    with pytest.raises(UsageError, match="--concurrency must be at least 1"):
        OpenAIOptions(concurrency=0)
    with pytest.raises(UsageError, match="unknown vLLM option"):
        VllmOptions.parse({"concurrency": 4})
    with pytest.raises(UsageError, match="NAME of an environment variable"):
        OpenAIOptions(api_key_env="sk-not-a-name")
    with pytest.raises(UsageError, match="must not carry a password"):
        OpenAIOptions(base_url="http://u:secret@h/v1")


def test_flag_help_and_defaults_come_from_the_schema() -> None:
    assert VllmOptions.flag_help("tensor_parallel_size") == "vLLM: GPUs per model."
    assert VllmOptions.flag_default("dtype") == "auto"
    # openai flags stay None until typed (the manifest records typed ones only).
    assert OpenAIOptions.flag_default("concurrency") is None
    assert OpenAIOptions.flag_help("concurrency") == "openai: requests in flight (default: 32)."
    assert OpenAIOptions.flag_help("timeout").endswith("(default: 120).")
    assert "backoff_base" not in [f.name for f in OpenAIOptions.flag_fields()]


def test_backends_take_their_validated_options(tmp_path: Path) -> None:
    options = backend_options("fake", {"answers": {"What?": ["4", 1.0]}})
    assert isinstance(options, FakeOptions) and options.record() == {
        "answers": {"What?": ["4", 1.0]}
    }
    with open_backend("fake", "m", options) as backend:
        assert isinstance(backend, FakeBackend) and backend.answers == {"What?": ["4", 1.0]}
    with pytest.raises(UsageError, match="unknown backend 'nope'"):
        backend_options("nope")
    with pytest.raises(UsageError, match="not options of"):
        backend_options("fake", VllmOptions())


def test_manifest_records_the_options_as_given(arithmetic_jsonl: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    opts = fake_options(arithmetic_jsonl, run, runs=1)
    evaluate(opts)
    recorded = json.loads((run / "manifest.json").read_text())["engine_options"]
    assert recorded == json.loads(json.dumps(opts.engine_options))


# -- registries ----------------------------------------------------------------
def test_export_formats_load_by_name_through_the_registry() -> None:
    assert len(FORMATS) == 6 and "verl" in FORMATS and "nope" not in FORMATS
    assert FORMATS["trl"] is get_format("TRL")
    with pytest.raises(KeyError):
        FORMATS["nope"]
