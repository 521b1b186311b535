"""The Ray pool (`curate eval --backend vllm --ray ... --replicas K`).

The unit tests check what crosses the wire and the option rules. The slow ones run a
real local Ray cluster (one per module, 2 CPUs, a small object store): replicas of the
fake backend against the single-process run (also with a replica killed mid-run, and
through adaptive rounds), then two replicas of the real vLLM engine on the bundled
tiny model against the session's single-process engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from curate.backends.base import Generation, GenerationRequest, SamplingConfig
from curate.backends.fake import FakeOptions, open_fake
from curate.backends.ray_pool import (
    EXIT_HOOK_ENV,
    RayPoolOptions,
    batch_size_for,
    decode_generations,
    decode_requests,
    encode_generations,
    encode_requests,
)
from curate.backends.vllm_options import VllmOptions
from curate.errors import UsageError
from curate.evaluation.adaptive import AdaptivePolicy, run_adaptive
from curate.evaluation.evaluate import evaluate
from curate.evaluation.options import EvalOptions
from curate.evaluation.runner import EvalResult, run_eval
from curate.graders import get_grader
from curate.store.run_dir import RolloutStore
from tests.conftest import (
    ARITHMETIC,
    TEST_ENGINE_OPTIONS,
    TINY_MODEL,
    VLLM_DEVICE,
    chat_prompts_and_references,
    run_chat_eval,
)

# Everything a rollout row holds that a replica decides (latency is the clock's).
COMPARED = ["sample_id", "rollout_idx", "score", "error", "completion", "finish_reason", "seed"]


# -- unit: the wire format and the options --------------------------------------------
def test_requests_round_trip_through_dataset_rows() -> None:
    requests = [
        GenerationRequest("a", "plain text", n=3, first_run=0, seed=7),
        GenerationRequest("b", [{"role": "user", "content": "Hi \u00e9"}], 2, 5, None),
    ]
    rows = encode_requests(requests)
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    indices, back = decode_requests(columns)
    assert indices == [0, 1] and back == requests


def test_generations_round_trip_with_errors_and_per_rollout_seeds() -> None:
    gens = [
        [Generation("12", "stop", 5, 2, 0.1, 1, None, None), Generation(None, error="boom")],
        [Generation("x", "length", 3, 9, 0.2, 2, None, 99)],
    ]
    back = dict(decode_generations(encode_generations([4, 1], gens)))
    assert back == {4: gens[0], 1: gens[1]}


def test_batches_spread_over_replicas_and_are_capped() -> None:
    assert batch_size_for(300, 2) == 38  # about 4 batches per replica
    assert batch_size_for(3, 2) == 1
    assert batch_size_for(100_000, 2) == 256
    assert batch_size_for(100_000, 2, cap=64) == 64


def test_ray_options_need_ray() -> None:
    with pytest.raises(UsageError, match="--replicas needs --ray"):
        VllmOptions.parse({"replicas": 2})
    with pytest.raises(UsageError, match="--gpus-per-replica needs --ray"):
        VllmOptions.parse({"gpus_per_replica": 1.0})
    opts = VllmOptions.parse({"ray": "auto", "replicas": 2, "kv_cache_memory_gb": 0.25})
    assert opts.record() == {"kv_cache_memory_gb": 0.25, "ray": "auto", "replicas": 2}
    # A replica's own engine options carry nothing of Ray.
    assert opts.local().ray is None and opts.local().replicas == 1
    with pytest.raises(UsageError, match="--replicas must be at least 1"):
        RayPoolOptions(replicas=0)


def test_ray_lines_go_to_fd2_while_a_pool_is_open(capfd: pytest.CaptureFixture[str]) -> None:
    """Ray's driver-side printer (its system lines, its workers' output) writes to fd 2,
    the engine log under capture, never to sys.stdout, and is Ray's own again after."""
    pytest.importorskip("ray")
    import ray._private.worker as ray_worker

    from curate.backends.ray_pool import ray_lines_to_engine_output

    original = ray_worker.print_to_stdstream
    died = "A worker died or was killed while executing a task by an unexpected system error."
    with ray_lines_to_engine_output():
        ray_worker.print_to_stdstream({"lines": [died], "pid": "raylet", "is_err": False}, False)
        worker = {"lines": ["INFO engine ready"], "pid": 4711, "actor_name": "Replica"}
        ray_worker.print_to_stdstream({**worker, "is_err": True}, ignore_prefix=False)
        # The autoscaler's periodic status dump is not an event: dropped, as Ray does.
        dump = {"lines": ["======== Autoscaler status ========"], "pid": "autoscaler"}
        ray_worker.print_to_stdstream({**dump, "is_err": False}, False)
    assert ray_worker.print_to_stdstream is original
    out, err = capfd.readouterr()
    assert out == ""
    assert err == f"(raylet) {died}\n(Replica pid=4711) INFO engine ready\n"


def test_replicas_without_ray_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    result = cli("eval", ARITHMETIC, "--model", TINY_MODEL, "--replicas", "2", "-o", tmp_path)
    assert result.exit_code == 2
    assert "--replicas needs --ray" in result.stderr
    assert "Traceback" not in result.stderr


# -- a real local Ray cluster ------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A local 2-CPU cluster for this module; yields the fault hook's armed-file path
    (the replicas see it through EXIT_HOOK_ENV)."""
    ray = pytest.importorskip("ray")
    armed = tmp_path_factory.mktemp("ray-hook") / "armed"
    ray.init(
        num_cpus=2,
        # No GPUs in the test cluster, whatever the machine has: the fake replicas then
        # reserve the same resources on every machine (with a GPU each they would wait
        # for a second GPU that a one-GPU machine lacks).
        num_gpus=0,
        include_dashboard=False,
        object_store_memory=256 << 20,
        log_to_driver=False,
        runtime_env={"env_vars": {EXIT_HOOK_ENV: str(armed)}},
    )
    try:
        yield armed
    finally:
        ray.shutdown()


def _fake_run(
    tmp: Path, name: str, pool: RayPoolOptions | None, **fake: Any
) -> tuple[EvalResult, pl.DataFrame, Any]:
    """Sixty arithmetic prompts x 8 runs through the fake backend, in this process or
    in a Ray pool of it; the result, the stored rollouts and the backend."""
    from curate.backends.ray_pool import open_ray_pool

    prompts = {f"q{i:02d}": f"What is {i} + {i}?" for i in range(60)}
    refs = {sid: str(2 * int(sid[1:])) for sid in prompts}
    answers = {p: (refs[sid], (0.0, 1.0, 0.5)[i % 3]) for i, (sid, p) in enumerate(prompts.items())}
    options = FakeOptions(answers=answers, **fake)
    store = RolloutStore(tmp / name)
    store.create()
    opened = (
        open_fake("fake", options, seed=0)
        if pool is None
        else open_ray_pool("fake", "fake", options, pool, seed=0)
    )
    grader = get_grader("numeric")
    try:
        with opened as backend:
            result = run_eval(
                store,
                backend=backend,
                grader=grader,
                prompts=prompts,
                references=refs,
                runs=8,
                mode="completion",
            )
    finally:
        grader.close()
    return result, store.rollouts(), backend


def _actors(processes: set[str]) -> set[str]:
    """The actor ids of "actor:pid" replica processes."""
    return {p.rpartition(":")[0] for p in processes}


def _rows(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(COMPARED).sort("sample_id", "rollout_idx")


@pytest.mark.slow
def test_two_replicas_store_what_one_process_stores(ray_cluster: Path, tmp_path: Path) -> None:
    _, alone, _ = _fake_run(tmp_path, "alone", None)
    result, pooled, backend = _fake_run(tmp_path, "pooled", RayPoolOptions(replicas=2))
    assert result.rollouts == 480 and result.errors == 0
    assert backend.pool_starts == 1 and len(backend.replica_processes) == 2
    assert pooled.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    assert _rows(pooled).equals(_rows(alone))


@pytest.mark.slow
def test_a_killed_replica_is_restarted_and_nothing_is_lost_or_doubled(
    ray_cluster: Path, tmp_path: Path
) -> None:
    _, alone, _ = _fake_run(tmp_path, "alone", None)
    # The first replica to reach its second batch exits at once (os._exit), as a
    # crash would; Ray restarts it and retries the batch it was holding.
    ray_cluster.write_text("2")
    pool = RayPoolOptions(replicas=2, batch_requests=5)
    result, pooled, backend = _fake_run(tmp_path, "pooled", pool, delay_s=0.02)
    assert not ray_cluster.exists() and Path(f"{ray_cluster}.fired").exists()
    # Restarted in place: still the pool's two actors, no new pool. (Whether the killed
    # process's first answer reached the driver before it died is Ray's timing: the
    # count of processes that answered is 2 or 3.)
    assert backend.pool_starts == 1
    assert len(_actors(backend.replica_processes)) == 2
    assert result.rollouts == 480 and result.errors == 0
    assert pooled.height == 480
    assert _rows(pooled).equals(_rows(alone))


@pytest.mark.slow
def test_adaptive_rounds_run_unchanged_through_one_pool(ray_cluster: Path, tmp_path: Path) -> None:
    """Every round of an adaptive run goes to the replicas started for the first one:
    the pool starts once, and the engine processes that answer are its two."""
    from curate.backends.ray_pool import open_ray_pool

    prompts = {f"q{i:02d}": f"What is {i} + {i}?" for i in range(24)}
    refs = {sid: str(2 * int(sid[1:])) for sid in prompts}
    answers = {p: (refs[sid], (0.0, 1.0, 0.3)[i % 3]) for i, (sid, p) in enumerate(prompts.items())}
    options = FakeOptions(answers=answers)
    policy = AdaptivePolicy(max_runs=4)
    frames = []
    for name in ("alone", "pooled"):
        store = RolloutStore(tmp_path / name)
        store.create()
        opened = (
            open_fake("fake", options)
            if name == "alone"
            else open_ray_pool("fake", "fake", options, RayPoolOptions(replicas=2))
        )
        grader = get_grader("numeric")
        with opened as backend:
            result = run_adaptive(
                store,
                policy=policy,
                backend=backend,
                grader=grader,
                prompts=prompts,
                references=refs,
                runs=4,
                mode="completion",
            )
        grader.close()
        assert result.rounds >= 2
        if name == "pooled":
            assert backend.pool_starts == 1
            assert len(backend.replica_processes) == 2
        frames.append(_rows(store.rollouts()))
    assert frames[0].equals(frames[1])


@pytest.mark.slow
def test_two_vllm_replicas_match_the_single_process_engine(
    ray_cluster: Path, vllm_backend: Any, tmp_path: Path
) -> None:
    """`curate eval --ray auto --replicas 2` on the CPU build: the same rollouts, scores
    and finish reasons as one engine in this process, for the same seeds."""
    if VLLM_DEVICE == "gpu":
        pytest.skip(
            "the module's Ray cluster has no GPUs (so that the fake replicas reserve the "
            "same on every machine); replicas of the CUDA build need a cluster with GPUs"
        )
    prompts, refs = chat_prompts_and_references(ARITHMETIC, 40)
    sampling = SamplingConfig(temperature=1.0, max_tokens=16)
    _, alone = run_chat_eval(
        vllm_backend, tmp_path / "alone", prompts, refs, runs=4, sampling=sampling
    )

    run = tmp_path / "pooled"
    options = {**TEST_ENGINE_OPTIONS, "ray": "auto", "replicas": 2}
    common = dict(data=ARITHMETIC, model=str(TINY_MODEL), runs=4, out=run, limit=40)
    outcome = evaluate(EvalOptions(**common, max_tokens=16, engine_options=options))
    assert outcome.result.rollouts == 160 and outcome.result.errors == 0
    pooled = RolloutStore(run).rollouts()
    assert pooled.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    assert _rows(pooled).equals(_rows(alone))

    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["engine_options"]["ray"] == "auto"
    assert manifest["engine_options"]["replicas"] == 2
    info = manifest["backend_info"]
    assert info["executor"] == "ray" and info["replicas"] == 2 and info["device"] == VLLM_DEVICE
    assert info["model"] == str(TINY_MODEL)
    # The chat template as a replica reads it is the one the local engine reads.
    assert manifest["chat_template_sha256"] == vllm_backend.info().chat_template_sha256
    # Another replica count (or no Ray) is not a score setting: the run resumes, and
    # with every rollout stored nothing starts.
    again = evaluate(EvalOptions(**common, max_tokens=16, engine_options=TEST_ENGINE_OPTIONS))
    assert again.result.rollouts == 0 and again.result.skipped == 160
