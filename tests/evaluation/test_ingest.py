"""`curate ingest`: trainers' rollout files as run directories.

The verl files are written here the way verl writes them: `RayPPOTrainer._dump_generations`
(verl/trainer/ppo/ray_trainer.py) joins `json.dumps(entry, ensure_ascii=False)` lines with
"\\n" into `{global_steps}.jsonl`, each entry holding input, output, gts, score and step plus
the reward function's extra per-rollout values; `input` is the prompt decoded with
`skip_special_tokens=True` (the chat template's text stays, its special tokens go). verl
does not install here, so its writer is reproduced; TRL does, and the slow test has TRL's
own GRPOTrainer write its completions files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import invoke_curate

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "sample_data" / "arithmetic.jsonl"


def questions(n: int) -> list[dict]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    return rows[:n]


def qwen_like(text: str) -> str:
    """A chat template's text once its special tokens are skipped (Qwen's layout)."""
    return f"system\nPlease reason step by step.\nuser\n{text}\nassistant\n"


def dump_generations(path: Path, step: int, entries: list[dict]) -> None:
    """verl's `_dump_generations`, field for field."""
    base = {k: [e[k] for e in entries] for k in entries[0]}
    n = len(entries)
    base["step"] = [step] * n
    lines = [json.dumps({k: v[i] for k, v in base.items()}, ensure_ascii=False) for i in range(n)]
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{step}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def verl_dir(tmp_path: Path) -> Path:
    """Steps 1 and 2: 6 samples x 4 rollouts; sample i right in min(i, 4) rollouts at step 1
    and in all four at step 2. DAPO's reward: score is +1/-1, acc the verdict."""
    out = tmp_path / "rollout_data"
    for step in (1, 2):
        entries = []
        for i, row in enumerate(questions(6)):
            for r in range(4):
                right = r < (min(i, 4) if step == 1 else 4)
                entries.append(
                    {
                        "input": qwen_like(row["question"]),
                        "output": row["answer"] if right else "0",
                        "gts": row["answer"],
                        "score": 1.0 if right else -1.0,
                        "acc": right,
                        "pred": row["answer"] if right else "0",
                    }
                )
        dump_generations(out, step, entries)
    return out


def read_rollouts(run: Path) -> pl.DataFrame:
    return pl.read_parquet(run / "rollouts" / "*.parquet").sort("sample_id", "rollout_idx")


def test_verl_steps_become_runs(verl_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    result = invoke_curate("ingest", verl_dir, "--data", DATA, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "48 of 48 rollouts matched" in result.stdout
    step1 = read_rollouts(out / "step-000001")
    assert step1.height == 24
    ids = [row["id"] for row in questions(6)]
    assert sorted(step1["sample_id"].unique().to_list()) == sorted(ids)
    assert (
        step1.group_by("sample_id")
        .agg(pl.col("rollout_idx").sort())
        .sort("sample_id")["rollout_idx"]
        .to_list()
        == [[0, 1, 2, 3]] * 6
    )
    # acc (the verdict) is the default score: sample i is right min(i, 4) times in 4.
    rates = step1.group_by("sample_id").agg(pl.col("score").mean()).sort("sample_id")
    expected = sorted(zip(ids, [min(i, 4) / 4 for i in range(6)], strict=True))
    assert list(zip(rates["sample_id"], rates["score"], strict=True)) == expected
    manifest = json.loads((out / "step-000002" / "manifest.json").read_text())
    assert manifest["ingested"]["score_field"] == "acc"
    assert manifest["ingested"]["first_step"] == 2
    assert manifest["runs"] == 4
    report = invoke_curate("report", out / "step-000001", "-f", "json")
    assert report.exit_code == 0, report.stderr
    assert json.loads(report.stdout)["categories"]["always_incorrect"] == 1
    index = json.loads((out / "ingest.json").read_text())
    assert [r["first_step"] for r in index["runs"]] == [1, 2]
    # Step 1's pass rates as a forecast of step 2's (all right): observed 1.0 in every bin.
    compared = invoke_curate("compare", out / "step-000001", out / "step-000002", "-f", "json")
    assert compared.exit_code == 0, compared.stderr
    forecast = json.loads(compared.stdout)["forecast"]
    assert forecast["samples"] == 6 and forecast["observed_mean"] == 1.0
    assert forecast["predicted_mean"] == pytest.approx(sum(min(i, 4) / 4 for i in range(6)) / 6)


def test_score_range_maps_the_reward_and_keeps_it_raw(verl_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    refused = invoke_curate("ingest", verl_dir, "--data", DATA, "-o", out, "--score-field", "score")
    assert refused.exit_code == 2
    assert "outside [0, 1]" in refused.stderr and "--score-range" in refused.stderr
    assert not (out / "step-000001").exists()  # nothing half-written
    result = invoke_curate(
        "ingest",
        verl_dir,
        "--data",
        DATA,
        "-o",
        out,
        "--score-field",
        "score",
        "--score-range",
        "-1:1",
    )
    assert result.exit_code == 0, result.stderr
    rows = read_rollouts(out / "step-000001")
    assert set(rows["raw_score"].to_list()) == {-1.0, 1.0}
    assert (rows["score"] == (rows["raw_score"] + 1) / 2).all()


def test_steps_pooling_and_selection(verl_dir: Path, tmp_path: Path) -> None:
    pooled = invoke_curate(
        "ingest", verl_dir, "--data", DATA, "-o", tmp_path / "a", "--steps-per-run", "2"
    )
    assert pooled.exit_code == 0, pooled.stderr
    both = read_rollouts(tmp_path / "a" / "steps-000001-000002")
    assert both.height == 48 and both["rollout_idx"].max() == 7
    only2 = invoke_curate("ingest", verl_dir, "--data", DATA, "-o", tmp_path / "b", "--steps", "2:")
    assert only2.exit_code == 0, only2.stderr
    assert [p.name for p in sorted((tmp_path / "b").glob("step-*"))] == ["step-000002"]


def test_unmatched_and_ambiguous_prompts_are_counted(tmp_path: Path) -> None:
    rows = questions(3)
    data = tmp_path / "data.jsonl"
    # The third question twice, under two ids: its rollouts cannot be told apart.
    dup = [*rows, {**rows[2], "id": "copy-of-3"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in dup))
    entries = [
        {"input": qwen_like(r["question"]), "output": "1", "gts": r["answer"], "score": 0.0}
        for r in rows
    ]
    entries.append(
        {"input": qwen_like("Not in the data set at all?"), "output": "1", "gts": "1", "score": 0.0}
    )
    dump_generations(tmp_path / "dump", 5, entries)
    result = invoke_curate("ingest", tmp_path / "dump", "--data", data, "-o", tmp_path / "runs")
    assert result.exit_code == 0, result.stderr
    assert "1 prompt(s) matched no sample and 1 matched several" in result.stderr
    manifest = json.loads((tmp_path / "runs" / "step-000005" / "manifest.json").read_text())
    assert manifest["ingested"]["unmatched_rollouts"] == 1
    assert manifest["ingested"]["ambiguous_rollouts"] == 1
    assert read_rollouts(tmp_path / "runs" / "step-000005").height == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "3:1"], "--steps"),
        (["--format", "nemo"], "unknown"),
        (["--score-field", "nope"], "'nope' is not a column"),
        (["--steps", "9:"], "no verl"),
    ],
)
def test_bad_options_are_one_line_exit_2(
    verl_dir: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    result = invoke_curate("ingest", verl_dir, "--data", DATA, "-o", tmp_path / "runs", *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not list((tmp_path / "runs").glob("step-*")) if (tmp_path / "runs").exists() else True


def test_bad_files_and_existing_output(verl_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    assert invoke_curate("ingest", verl_dir, "--data", DATA, "-o", out).exit_code == 0
    again = invoke_curate("ingest", verl_dir, "--data", DATA, "-o", out)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert invoke_curate("ingest", verl_dir, "--data", DATA, "-o", out, "--force").exit_code == 0
    (verl_dir / "3.jsonl").write_text('{"input": "x", "output": "y", "score": 1}\nnot json\n')
    broken = invoke_curate("ingest", verl_dir, "--data", DATA, "-o", tmp_path / "other")
    assert broken.exit_code == 2
    assert "3.jsonl: line 2 is not JSON" in broken.stderr
    empty = invoke_curate("ingest", tmp_path / "nothing", "--data", DATA, "-o", tmp_path / "x")
    assert empty.exit_code == 2 and "no such file" in empty.stderr


TRL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rows = [json.loads(line) for line in open(sys.argv[1])][:4]
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": r["question"]}], "answer": r["answer"]}
         for r in rows]
    )

    def correct(completions, answer, **kwargs):
        return [float(c[0]["content"].strip() == a) for c, a in zip(completions, answer)]

    args = GRPOConfig(
        output_dir=sys.argv[2], per_device_train_batch_size=8, num_generations=4,
        max_completion_length=8, max_steps=2, logging_steps=1, log_completions=True,
        report_to=[], use_cpu=True, save_strategy="no", bf16=False, seed=0,
    )
    GRPOTrainer(model=sys.argv[3], reward_funcs=correct, args=args, train_dataset=data).train()
    """
)


@pytest.mark.slow
def test_trl_grpo_trainer_files_ingest(tmp_path: Path) -> None:
    """TRL's own GRPOTrainer (log_completions=True) trains the bundled model two steps."""
    script = tmp_path / "train.py"
    script.write_text(TRL_SCRIPT)
    trainer_out = tmp_path / "trl"
    done = subprocess.run(
        [sys.executable, script, DATA, trainer_out, REPO / "sample_data" / "tiny-math"],
        capture_output=True,
        text=True,
        timeout=900,
        env=None,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    written = sorted((trainer_out / "completions").glob("completions_*.parquet"))
    assert [p.name for p in written] == ["completions_00001.parquet", "completions_00002.parquet"]
    result = invoke_curate("ingest", trainer_out, "--data", DATA, "-o", tmp_path / "runs")
    assert result.exit_code == 0, result.stderr
    assert "score 'correct'" in result.stdout
    for step, file in ((1, written[0]), (2, written[1])):
        logged = pl.read_parquet(file)
        rows = read_rollouts(tmp_path / "runs" / f"step-{step:06d}")
        assert rows.height == logged.height
        # The same rewards, in the same multiset, as TRL logged them.
        assert sorted(rows["score"].to_list()) == sorted(logged["correct"].to_list())
        assert set(rows["sample_id"]) <= {r["id"] for r in questions(4)}


def test_a_multiple_choice_set_matches_the_prompts_its_layout_rendered(tmp_path: Path) -> None:
    """The class: a data set whose prompt the layout builds (options lettered under the
    question). The trainer saw that rendered prompt, so ingest must read the data the way
    `curate eval` does, and record the layout for the exports that follow."""
    from curate.data.samples import build_prompts, load_samples

    data = REPO / "sample_data" / "mmlu_layout.jsonl"
    samples, fields = load_samples(data, layout="auto")
    assert fields.layout == "mmlu"
    prompts = build_prompts(samples, fields, "chat", source=data)
    entries = [
        {"input": qwen_like(prompt[-1]["content"]), "output": "A", "gts": "A", "score": 1.0}
        for prompt in prompts
        for _ in range(2)
    ]
    dump_generations(tmp_path / "dump", 1, entries)
    out = tmp_path / "runs"
    result = invoke_curate("ingest", tmp_path / "dump", "--data", data, "-o", out)
    assert result.exit_code == 0, result.stderr
    n = 2 * samples.height
    assert f"{n} of {n} rollouts matched" in result.stdout
    manifest = json.loads((out / "step-000001" / "manifest.json").read_text())
    assert manifest["layout"] == "mmlu"
