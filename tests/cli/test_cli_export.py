"""`curate export` as a real process: the summary, bad input (one line, exit 2, nothing
written), and a real run of the bundled model exported in every kind and loaded with
`datasets` and TRL's data utilities (slow)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ARITHMETIC, TINY_MODEL
from tests.exports.rollout_run import write_run

KINDS = ("sft", "dpo", "groups", "balanced")


def test_export_prints_what_it_wrote(
    tmp_path: Path, run_curate: Callable[..., Any], snapshot: Callable[..., set[Path]]
) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    res = run_curate("export", run, "--as", "sft", "-o", out / "sft.jsonl")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert (
        lines[0]
        == f"exported 4 sft rows from 3 of 4 prompts (conversational) -> {out / 'sft.jsonl'}"
    )
    assert "  left out 1 error rollouts" in lines and "  left out 2 cut-short rollouts" in lines
    assert snapshot(out) == {out / "sft.jsonl"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--as", "balanced", "--group-size", "5", "-o", "{out}/b.jsonl"], "even number"),
        (["--as", "sft", "-o", "{out}/b.csv"], "writes .jsonl or .parquet"),
        (["--as", "groups", "-k", "2", "-o", "{out}/b.jsonl"], "--per-prompt"),
        (["--as", "sft", "-o", "{out}/no/such/dir/b.jsonl"], "directory does not exist"),
        (["--as", "ppo", "-o", "{out}/b.jsonl"], "ppo"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    tmp_path: Path,
    run_curate: Callable[..., Any],
    snapshot: Callable[..., set[Path]],
    args: list[str],
    message: str,
) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(out, run)
    res = run_curate("export", run, *[a.format(out=out) for a in args])
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    if args[1] != "ppo":  # typer's own usage error is a box; curate's are one line
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert snapshot(out, run) == before


def test_a_bare_score_table_is_refused(tmp_path: Path, run_curate: Callable[..., Any]) -> None:
    table = tmp_path / "scores.jsonl"
    table.write_text('{"sample_id": "a", "score": 1.0}\n')
    res = run_curate("export", table, "--as", "sft", "-o", tmp_path / "x.jsonl")
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"curate: error: {table}: not a run directory from `curate eval` (exports of rollouts "
        "need their texts)"
    )
    assert not (tmp_path / "x.jsonl").exists()


def test_nothing_to_export_exits_1_and_keeps_an_earlier_file(
    tmp_path: Path, run_curate: Callable[..., Any]
) -> None:
    run = write_run(tmp_path / "run")
    out = tmp_path / "b.jsonl"
    out.write_text("earlier\n")
    res = run_curate("export", run, "--as", "balanced", "--group-size", "16", "-o", out)
    assert res.returncode == 1
    assert "nothing written" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert out.read_text() == "earlier\n"


# -- a real run of the bundled model -------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("vllm")
    import subprocess
    import sys

    run = tmp_path_factory.mktemp("export") / "run"
    args = [
        *("eval", str(ARITHMETIC), "--backend", "vllm", "--model", str(TINY_MODEL)),
        *("--max-tokens", "16", "--limit", "24", "-n", "8", "--out", str(run), "--quiet"),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "curate", *args], capture_output=True, text=True, timeout=900
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return run


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_real_run_exports_and_loads_with_trl(
    tiny_run: Path, tmp_path: Path, run_curate: Callable[..., Any], kind: str
) -> None:
    datasets = pytest.importorskip("datasets")
    trl_data = pytest.importorskip("trl.data_utils")
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(TINY_MODEL))
    for suffix, loader in ((".jsonl", "json"), (".parquet", "parquet")):
        out = tmp_path / f"{kind}{suffix}"
        extra = ["--group-size", "4"] if kind == "balanced" else []
        res = run_curate("export", tiny_run, "--as", kind, *extra, "-o", out)
        assert res.returncode == 0, res.stderr
        rows = datasets.load_dataset(loader, data_files=str(out), split="train")
        assert rows.num_rows > 0
        first = rows[0]
        assert trl_data.is_conversational(first)
        if kind in ("sft", "dpo"):
            rendered = trl_data.maybe_apply_chat_template(first, tokenizer)
            assert "What is" in (rendered.get("text") or rendered["prompt"])
        if kind == "balanced":
            for row in rows:
                assert sum(r == 1.0 for r in row["rewards"]) in range(1, 4)
                assert sum(row["advantages"]) == pytest.approx(0.0, abs=1e-9)
        if kind in ("sft", "dpo") and suffix == ".jsonl":
            assert _one_training_step(kind, rows, tmp_path) > 0.0
    if kind != "sft":
        return
    standard = tmp_path / "sft_standard.parquet"
    res = run_curate("export", tiny_run, "--as", "sft", "--style", "standard", "-o", standard)
    assert res.returncode == 0, res.stderr
    row = datasets.load_dataset("parquet", data_files=str(standard), split="train")[0]
    assert row["prompt"] == tokenizer.apply_chat_template(
        [{"role": "user", "content": row["prompt"].split("<|user|>")[1].split("\n")[0]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert not trl_data.is_conversational(row)


def _one_training_step(kind: str, rows: Any, tmp_path: Path) -> float:
    """One optimiser step of TRL's own trainer (SFTTrainer or DPOTrainer) on the bundled
    model with the exported rows: its loss (the trainer read and tokenised every row)."""
    trl = pytest.importorskip("trl")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(TINY_MODEL))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(TINY_MODEL))
    common: dict[str, Any] = {
        "output_dir": str(tmp_path / f"{kind}-trainer"),
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "report_to": [],
        "use_cpu": True,
        "save_strategy": "no",
        "disable_tqdm": True,
    }
    if kind == "sft":
        trainer = trl.SFTTrainer(
            model=model,
            train_dataset=rows,
            processing_class=tokenizer,
            args=trl.SFTConfig(**common),
        )
    else:
        trainer = trl.DPOTrainer(
            model=model,
            train_dataset=rows,
            processing_class=tokenizer,
            args=trl.DPOConfig(**common),
        )
    return float(trainer.train().training_loss)
