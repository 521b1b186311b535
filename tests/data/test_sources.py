"""Evaluation inputs beyond single table files: Hugging Face datasets saved with
`save_to_disk` (with --split), directories of Parquet shards, and verl-style chat data
whose answer sits in `reward_model.ground_truth`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from curate.cli.app import app
from curate.data.samples import (
    answer_values,
    assign_ids,
    build_prompts,
    file_sha256,
    load_dataset,
    resolve_fields,
)
from curate.data.sources import source_files, source_kind
from curate.errors import InputError, UsageError
from curate.evaluation.evaluate import evaluate
from curate.store.run_dir import RolloutStore
from tests.conftest import fake_eval_options

datasets = pytest.importorskip("datasets")


def gsm_rows(n: int, offset: int = 0) -> list[dict[str, Any]]:
    return [
        {"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(offset, offset + n)
    ]


def verl_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"What is {i} + {i}?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "extra_info": {"split": "train", "index": i},
        }
        for i in range(n)
    ]


@pytest.fixture(autouse=True)
def _quiet_datasets() -> None:
    datasets.disable_progress_bars()


@pytest.fixture
def hf_dict(tmp_path: Path) -> Path:
    """A DatasetDict saved with save_to_disk: train (6 rows) and test (3 rows)."""
    path = tmp_path / "gsm_hf"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(gsm_rows(6)),
            "test": datasets.Dataset.from_list(gsm_rows(3, offset=100)),
        }
    ).save_to_disk(str(path))
    return path


def test_saved_dataset_is_read_with_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "single"
    ds = datasets.Dataset.from_list(gsm_rows(5)).shuffle(seed=3)  # an indices mapping
    ds.save_to_disk(str(path))
    frame = load_dataset(path)
    assert source_kind(path) == "hf-dataset"
    assert frame.to_dicts() == list(ds)  # rows in the dataset's (shuffled) order
    fields = resolve_fields(frame)
    assert (fields.prompt_field, fields.answer_field) == ("question", "answer")


def test_saved_dataset_dict_needs_a_split(hf_dict: Path) -> None:
    assert source_kind(hf_dict) == "hf-dataset-dict"
    with pytest.raises(UsageError, match=r"splits train, test; choose one with --split"):
        load_dataset(hf_dict)
    assert load_dataset(hf_dict, split="train").to_dicts() == gsm_rows(6)
    assert load_dataset(hf_dict, split="test").to_dicts() == gsm_rows(3, offset=100)
    assert load_dataset(hf_dict, split="test", limit=2).height == 2
    with pytest.raises(UsageError, match=r"no split 'dev' \(have: train, test\)"):
        load_dataset(hf_dict, split="dev")


def test_split_only_applies_to_dataset_directories(tmp_path: Path) -> None:
    table = tmp_path / "d.jsonl"
    table.write_text(json.dumps(gsm_rows(1)[0]) + "\n")
    with pytest.raises(UsageError, match="not a table file"):
        load_dataset(table, split="train")
    single = tmp_path / "single"
    datasets.Dataset.from_list(gsm_rows(2)).save_to_disk(str(single))
    with pytest.raises(UsageError, match="has no splits"):
        load_dataset(single, split="train")


def test_single_split_dataset_dict_needs_no_split(tmp_path: Path) -> None:
    path = tmp_path / "only"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(gsm_rows(4))}).save_to_disk(str(path))
    assert load_dataset(path).height == 4


def test_dataset_hash_covers_the_split(hf_dict: Path) -> None:
    train, test = file_sha256(hf_dict, split="train"), file_sha256(hf_dict, split="test")
    assert train != test
    assert file_sha256(hf_dict, split="train") == train  # stable


def test_parquet_shard_directory(tmp_path: Path) -> None:
    root = tmp_path / "shards"
    (root / "data").mkdir(parents=True)
    rows = gsm_rows(9)
    # Hub layout: data/SPLIT-0000N-of-0000M.parquet, read in name order.
    pl.DataFrame(rows[3:6]).write_parquet(root / "data" / "train-00001-of-00003.parquet")
    pl.DataFrame(rows[:3]).write_parquet(root / "data" / "train-00000-of-00003.parquet")
    pl.DataFrame(rows[6:]).write_parquet(root / "data" / "test-00000-of-00001.parquet")
    (root / ".cache").mkdir()
    pl.DataFrame({"junk": [1]}).write_parquet(root / ".cache" / "x.parquet")  # skipped
    (root / "README.md").write_text("# card\n")
    assert source_kind(root) == "parquet-dir"
    assert load_dataset(root, split="train").to_dicts() == rows[:6]
    assert load_dataset(root, split="test").to_dicts() == rows[6:]
    everything = load_dataset(root)
    assert everything.height == 9 and "junk" not in everything.columns
    with pytest.raises(UsageError, match="no Parquet shard belongs to split 'dev'"):
        load_dataset(root, split="dev")
    assert file_sha256(root, split="train") != file_sha256(root)


def test_shards_in_split_directories(tmp_path: Path) -> None:
    root = tmp_path / "by_dir"
    for split, offset in (("train", 0), ("validation", 50)):
        (root / split).mkdir(parents=True)
        pl.DataFrame(gsm_rows(2, offset)).write_parquet(root / split / "part-0.parquet")
    files = source_files(root, split="validation")
    assert [f.relative_to(root).as_posix() for f in files] == ["validation/part-0.parquet"]
    assert load_dataset(root, split="validation").to_dicts() == gsm_rows(2, 50)


def test_directories_that_are_no_dataset(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="neither a Hugging Face dataset"):
        load_dataset(empty)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "state.json").write_text('{"_data_files": [{"filename": "gone.arrow"}]}')
    with pytest.raises(InputError, match=r"missing data file\(s\) gone.arrow"):
        load_dataset(broken)


def test_verl_chat_prompt_and_nested_answer(tmp_path: Path) -> None:
    path = tmp_path / "verl.parquet"
    pl.DataFrame(verl_rows(3)).write_parquet(path)
    frame = load_dataset(path)
    fields = resolve_fields(frame)
    assert fields.messages_field == "prompt" and fields.prompt_field is None
    assert fields.answer_field == "reward_model.ground_truth"
    frame = assign_ids(frame, fields)
    assert answer_values(frame, fields) == ["0", "2", "4"]
    prompts = build_prompts(frame, fields, "chat", system="Be brief.")
    assert prompts[1] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 1 + 1?"},
    ]
    # The same field named explicitly, and the message list named as the prompt field.
    named = resolve_fields(frame, prompt_field="prompt", answer_field="reward_model.ground_truth")
    assert (named.messages_field, named.answer_field) == ("prompt", "reward_model.ground_truth")
    with pytest.raises(InputError, match=r"no answer column 'reward_model\.nope'"):
        resolve_fields(frame, answer_field="reward_model.nope")
    with pytest.raises(InputError, match=r"no prompt column 'reward_model\.style'"):
        resolve_fields(frame, prompt_field="reward_model.style")


def test_top_level_answer_beats_the_nested_one() -> None:
    frame = pl.DataFrame(verl_rows(1)).with_columns(pl.lit("x").alias("solution"))
    assert resolve_fields(frame).answer_field == "solution"


def _answers(prompts: list[str], rates: tuple[float, ...] = (0.0, 1.0, 0.5)) -> dict:
    return {p: [str(2 * i), rates[i % 3]] for i, p in enumerate(prompts)}


def test_eval_on_a_saved_dataset_split(hf_dict: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    prompts = [r["question"] for r in gsm_rows(3, offset=100)]
    answers = {p: [str(2 * (100 + i)), 1.0] for i, p in enumerate(prompts)}
    outcome = evaluate(fake_eval_options(hf_dict, run, answers, split="test", runs=2))
    assert outcome.result.rollouts == 6
    store = RolloutStore(run)
    manifest = store.read_manifest()
    assert manifest["dataset_split"] == "test"
    assert manifest["dataset_sha256"] == file_sha256(hf_dict, split="test")
    samples = store.read_samples()
    assert samples is not None and samples["question"].to_list() == prompts
    assert store.rollouts()["score"].to_list() == [1.0] * 6
    # Another split of the same directory is another data set: resuming is refused.
    with pytest.raises(UsageError, match="data set contents changed"):
        evaluate(fake_eval_options(hf_dict, run, answers, split="train", runs=2))


def test_eval_on_verl_parquet_shards(tmp_path: Path) -> None:
    root = tmp_path / "verl_shards"
    root.mkdir()
    rows = verl_rows(6)
    pl.DataFrame(rows[:3]).write_parquet(root / "part-0.parquet")
    pl.DataFrame(rows[3:]).write_parquet(root / "part-1.parquet")
    run = tmp_path / "run"
    answers = _answers([r["prompt"][0]["content"] for r in rows])
    evaluate(fake_eval_options(root, run, answers, runs=4))
    manifest = RolloutStore(run).read_manifest()
    assert manifest["messages_field"] == "prompt"
    assert manifest["answer_field"] == "reward_model.ground_truth"
    assert manifest["grader"] == "numeric"  # every ground truth is a number
    means = RolloutStore(run).rollouts().group_by("sample_id").agg(pl.col("score").mean())
    samples = RolloutStore(run).read_samples()
    assert samples is not None and samples.height == 6
    order = dict(zip(samples["sample_id"], range(6), strict=True))
    got = {order[sid]: mean for sid, mean in means.rows()}
    assert got[0] == 0.0 and got[1] == 1.0 and got[3] == 0.0 and got[4] == 1.0


def test_cli_eval_split_option(hf_dict: Path, tmp_path: Path) -> None:
    run = tmp_path / "cli-run"
    args = [
        "eval",
        str(hf_dict),
        "--split",
        "train",
        "--backend",
        "fake",
        "--model",
        "m",
        "-n",
        "2",
        "-o",
        str(run),
        "-q",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    store = RolloutStore(run)
    assert store.read_manifest()["dataset_split"] == "train"
    samples = store.read_samples()
    assert samples is not None and samples.height == 6
    result = CliRunner().invoke(app, ["eval", str(hf_dict), "--backend", "fake", "-m", "m"])
    assert result.exit_code == 2
    assert "choose one with --split" in result.stderr
