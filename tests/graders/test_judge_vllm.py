"""The judge against a real OpenAI-compatible server: vLLM's, serving the bundled tiny
model (CPU build). That model answers arithmetic, never a verdict: every judged rollout
must become an error row that keeps the judge's text, never a 0; the judge's tokens are
counted; a second pass pays for nothing; the key reaches no file.

The session's one server (tests/conftest.py `vllm_server`, shared with
tests/backends/test_openai_server.py); it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("openai")
pytest.importorskip("vllm")

from curate.evaluation.evaluate import evaluate
from curate.graders.judge import CACHE_FILE
from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import VLLMServer
from tests.conftest import TINY_MODEL, VLLM_SERVER_KEY, fake_eval_options, invoke_curate

pytestmark = pytest.mark.slow

MODEL = str(TINY_MODEL)
KEY = VLLM_SERVER_KEY
KEY_ENV = "CURATE_TEST_JUDGE_VLLM_KEY"
# Short enough for the server's 256-token context with room for the answer.
RUBRIC = "Grade the answer.\nQ: {prompt}\nA: {completion}\nRef: {reference}\nSCORE:"


@pytest.fixture
def server(vllm_server: VLLMServer) -> VLLMServer:
    """The session's server (tests/conftest.py), shared with the backend tests."""
    return vllm_server


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
            + "\n"
            for i in range(1, 5)
        )
    )
    return path


def _judge_flags(server: VLLMServer, rubric: Path) -> list[object]:
    return [
        "--judge-model",
        MODEL,
        "--judge-base-url",
        server.base_url,
        "--judge-api-key-env",
        KEY_ENV,
        "--rubric",
        rubric,
        "--judge-max-tokens",
        12,
    ]


def _no_key_on_disk(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_regrade_with_a_real_judge_keeps_unparsable_answers_as_errors(
    server: VLLMServer, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)
    answers = {f"What is {i} + {i}?": (str(2 * i), 0.5) for i in range(1, 5)}
    source = tmp_path / "run"
    evaluate(fake_eval_options(data, source, answers, runs=3, grader="numeric"))
    out = tmp_path / "judged"
    args = ["grade", source, "--grader", "judge", "--out", out, *_judge_flags(server, rubric)]
    first = invoke_curate(*args, env={KEY_ENV: KEY})
    assert first.exit_code == 0, first.stderr
    rows = RolloutStore(out).rollouts()
    assert rows.height == 12
    assert rows["score"].null_count() == 12  # no verdict anywhere: no score, and no 0
    assert rows["error"].str.starts_with("grader: judge answer has no verdict").all()
    assert rows["extracted"].null_count() == 0  # the judge's own text, kept
    manifest = json.loads((out / "manifest.json").read_text())
    usage = manifest["judge_usage"]
    assert usage["calls"] > 0 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert manifest["judge_options"]["api_key_env"] == KEY_ENV
    assert len((out / CACHE_FILE).read_text().splitlines()) == usage["calls"]
    again = invoke_curate(*args, env={KEY_ENV: KEY})
    assert again.exit_code == 0, again.stderr
    assert "judge: 0 calls" in again.stdout
    _no_key_on_disk(out)


def test_eval_with_policy_and_judge_on_the_real_server(
    server: VLLMServer, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)
    out = tmp_path / "run"
    result = invoke_curate(
        "eval",
        data,
        "--backend",
        "openai",
        "--model",
        MODEL,
        "--base-url",
        server.base_url,
        "--api-key-env",
        KEY_ENV,
        "-n",
        2,
        "--max-tokens",
        8,
        "--out",
        out,
        "--quiet",
        "--grader",
        "judge",
        *_judge_flags(server, rubric),
        env={KEY_ENV: KEY},
    )
    # Every rollout's judgement is unparsable: the grading watch stops the run (exit 1)
    # with what it stored, each an error row with the judge's text.
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "grader 'judge' failed on all" in result.stderr
    rows = RolloutStore(out).rollouts()
    assert rows.height == 8 and rows["score"].null_count() == 8
    assert rows.filter(pl.col("extracted").is_null()).height == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judge_usage"]["calls"] > 0
    _no_key_on_disk(out)
