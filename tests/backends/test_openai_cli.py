"""`curate eval --backend openai` and `curate report` on its runs, against the fake
server and the fault proxy (loopback only, in-process, fast)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("openai")

from curate.store.run_dir import RolloutStore
from tests.backends.fault_proxy import FakeOpenAIServer, FaultProxy
from tests.conftest import invoke_curate

KEY = "sk-cli-test-SECRET-0123456789"
KEY_ENV = "CURATE_TEST_OPENAI_KEY"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "arith.jsonl"
    rows = [
        {"id": f"q{i:02d}", "question": f"What is {i} + {2 * i}?", "answer": str(3 * i)}
        for i in range(12)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=KEY) as srv:
        yield srv


def eval_args(data: Path, out: Path, base_url: str, *extra: object) -> list[object]:
    return [
        "eval",
        data,
        "--backend",
        "openai",
        "--model",
        "fake-model",
        "--base-url",
        base_url,
        "--api-key-env",
        KEY_ENV,
        "--rollouts",
        4,
        "--max-tokens",
        8,
        "--out",
        out,
        "--quiet",
        "--concurrency",
        4,
        *extra,
    ]


def all_text(run_dir: Path) -> str:
    """Every file of a run directory as text (Parquet bytes decoded leniently)."""
    return "\n".join(p.read_bytes().decode("latin-1") for p in run_dir.rglob("*") if p.is_file())


def test_eval_report_and_cost(
    data: Path, tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    out = tmp_path / "run"
    res = invoke_curate(*eval_args(data, out, server.base_url))
    assert res.exit_code == 0, res.stderr
    assert "48 new rollouts" in res.stdout and "0 errors" in res.stdout
    frame = RolloutStore(out).rollouts()
    assert frame.height == 48 and frame["error"].null_count() == 48
    assert frame.select(pl.struct("sample_id", "rollout_idx").is_unique().all()).item()
    assert frame["prompt_tokens"].null_count() == 0 and frame["attempts"].min() == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"] == "openai"
    assert manifest["engine_options"]["api_key_env"] == KEY_ENV
    assert manifest["engine_options"]["base_url"] == server.base_url
    assert KEY not in all_text(out) and KEY not in res.stdout + res.stderr

    rep = invoke_curate("report", out, "--format", "json", "--price-in", 2, "--price-out", 10)
    assert rep.exit_code == 0, rep.stderr
    usage = json.loads(rep.stdout)["usage"]
    prompt, completion = int(frame["prompt_tokens"].sum()), int(frame["completion_tokens"].sum())
    # n=4 per request: the 12 prompts are billed once each, not once per rollout.
    assert prompt == sum(len(f"What is {i} + {2 * i}?") for i in range(12))
    assert usage == {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": pytest.approx((prompt * 2 + completion * 10) / 1e6),
    }
    table = invoke_curate("report", out, "--price-in", 2, "--price-out", 10)
    assert "prompt tokens" in table.stdout and "cost (USD)" in table.stdout
    md = invoke_curate("report", out, "--format", "markdown")
    assert f"| prompt tokens | {prompt:,} |" in md.stdout


def test_dry_run_estimates_without_sending(
    data: Path, tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    out = tmp_path / "run"
    res = invoke_curate(
        *eval_args(data, out, server.base_url, "--dry-run", "--price-in", 1, "--price-out", 2)
    )
    assert res.exit_code == 0, res.stderr
    assert "12 samples x 4 rollouts = 48 rollouts, 0 already stored" in res.stdout
    assert "48 to generate" in res.stdout and "completion <= 384" in res.stdout
    assert "cost: <= $" in res.stdout
    assert server.bodies == [] and not out.exists()
    # After a partial run, the dry run counts only what is missing.
    assert invoke_curate(*eval_args(data, out, server.base_url, "--limit", 3)).exit_code == 0
    again = invoke_curate(*eval_args(data, out, server.base_url, "--dry-run"))
    assert "12 rollouts already stored" not in again.stdout
    assert "48 rollouts, 12 already stored" in again.stdout and "36 to generate" in again.stdout
    assert "pass --price-in" in again.stdout


def test_outage_error_rows_fail_the_gate_and_resume_fills_them(
    data: Path, tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    out = tmp_path / "run"
    doomed = ["What is 2 + 4?", "What is 7 + 14?"]
    with FaultProxy(server.url, fail_forever=doomed) as proxy:
        res = invoke_curate(*eval_args(data, out, proxy.base_url, "--max-retries", 1))
        assert res.exit_code == 0, res.stderr
        assert "8 errors" in res.stdout
        assert "retries" in res.stderr and "8 rollouts failed after retries" in res.stderr
        frame = RolloutStore(out).rollouts()
        errors = frame.filter(pl.col("error").is_not_null())
        assert errors.height == 8 and errors["score"].null_count() == 8  # never scored as 0
        assert set(errors["sample_id"]) == {"q02", "q07"} and errors["attempts"].min() == 2

        rep = invoke_curate("report", out, "--format", "json", "--max-error-rate", 0.05)
        assert rep.exit_code == 1 and "check failed" in rep.stderr
        assert json.loads(rep.stdout)["errors"] == 8

        proxy.recover()
        res = invoke_curate(*eval_args(data, out, proxy.base_url))
        assert res.exit_code == 0, res.stderr
        assert "8 new rollouts" in res.stdout and "40 already stored" in res.stdout
    frame = RolloutStore(out).rollouts()
    assert frame.height == 48 and frame["error"].null_count() == 48
    rep = invoke_curate("report", out, "--max-error-rate", 0.0)
    assert rep.exit_code == 0, rep.stderr


@pytest.mark.parametrize(
    ("model", "key", "needle"),
    [
        ("no-such-model", KEY, "model 'no-such-model' not found at http://127.0.0.1:"),
        ("fake-model", "sk-not-the-right-key-000", "authentication failed at http://127.0.0.1:"),
    ],
)
def test_refusals_stop_with_one_line_and_exit_1(
    data: Path,
    tmp_path: Path,
    server: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    key: str,
    needle: str,
) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    args = eval_args(data, tmp_path / "run", server.base_url)
    args[args.index("fake-model")] = model
    res = invoke_curate(*args)
    assert res.exit_code == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert key not in res.stderr + res.stdout
    assert len(server.bodies) == 1


def test_option_mistakes_are_usage_errors(data: Path, tmp_path: Path) -> None:
    res = invoke_curate("eval", data, "--backend", "openai", "--model", "m", "--api-key-env", KEY)
    assert res.exit_code == 2 and "NAME of an environment variable" in res.stderr
    assert KEY not in res.stderr + res.stdout
    res = invoke_curate("eval", data, "--model", "m", "--concurrency", 4, "--out", tmp_path / "r")
    assert res.exit_code == 2 and "--concurrency is an option of --backend openai" in res.stderr
    res = invoke_curate(
        "eval",
        data,
        "--backend",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://u:pw@127.0.0.1:9/v1",
        "--out",
        tmp_path / "r",
    )
    assert res.exit_code == 2 and "pw" not in res.stderr


def test_report_usage_from_a_score_table(tmp_path: Path) -> None:
    table = tmp_path / "scores.parquet"
    pl.DataFrame(
        {
            "sample_id": ["a", "a", "b", "b"],
            "score": [1.0, 0.0, None, 1.0],
            "error": [None, None, "timeout", None],
            "prompt_tokens": [10, 10, None, 7],
            "completion_tokens": [3, 4, None, 5],
        }
    ).write_parquet(table)
    rep = invoke_curate("report", table, "--format", "json", "--price-out", 1000)
    assert rep.exit_code == 0, rep.stderr
    assert json.loads(rep.stdout)["usage"] == {
        "prompt_tokens": 27,
        "completion_tokens": 12,
        "cost_usd": pytest.approx(0.012),
    }
    plain = tmp_path / "plain.csv"
    pl.DataFrame({"sample_id": ["a"], "score": [1.0]}).write_csv(plain)
    assert "usage" not in json.loads(invoke_curate("report", plain, "--format", "json").stdout)
