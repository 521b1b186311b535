"""`--format verl`: read back the way verl reads its RL data (datasets' Parquet loader),
with the nested Parquet types checked by pyarrow, every row and field compared."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import fake_eval_options

from .conftest import assert_stats, chat_prompt, expected, frame_rows

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")


def _is_string(t: object) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_list(t: object) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def test_verl_parquet_schema_is_verls(cli, chat_run: Path, outdir: Path) -> None:
    out = outdir / "train.parquet"
    result = cli("filter", chat_run, "--format", "verl", "-o", out)
    assert result.exit_code == 0, result.stderr
    schema = pq.read_schema(out)
    assert schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert _is_string(schema.field("data_source").type)
    assert _is_string(schema.field("ability").type)
    prompt = schema.field("prompt").type
    assert _is_list(prompt) and pa.types.is_struct(prompt.value_type)
    message = prompt.value_type
    assert [message.field(i).name for i in range(message.num_fields)] == ["role", "content"]
    assert all(_is_string(message.field(i).type) for i in range(message.num_fields))
    reward = schema.field("reward_model").type
    assert pa.types.is_struct(reward)
    assert {reward.field(i).name for i in range(reward.num_fields)} == {"style", "ground_truth"}
    assert _is_string(reward.field("ground_truth").type)
    extra = schema.field("extra_info").type
    assert pa.types.is_struct(extra)
    types = {extra.field(i).name: extra.field(i).type for i in range(extra.num_fields)}
    assert set(types) == {
        "index",
        "sample_id",
        "pass_rate",
        "smoothed_pass_rate",
        "variance",
        "n_rollouts",
        # every column of the input
        "id",
        "question",
        "answer",
        "meta",
    }
    assert pa.types.is_int64(types["index"]) and pa.types.is_int64(types["n_rollouts"])
    assert _is_string(types["sample_id"])
    for name in ("pass_rate", "smoothed_pass_rate", "variance"):
        assert pa.types.is_float64(types[name])
    assert "verl: data.train_files=" in result.stdout and "data.prompt_key=prompt" in result.stdout


def test_verl_rows_round_trip_through_datasets(
    cli, chat_run: Path, outdir: Path, tmp_path: Path
) -> None:
    out = outdir / "train.parquet"
    assert cli("filter", chat_run, "--format", "verl", "-o", out).exit_code == 0
    want = expected(chat_run)
    # verl's RLHFDataset: datasets.load_dataset("parquet", data_files=FILE)["train"]
    ds = datasets.load_dataset("parquet", data_files=str(out), cache_dir=str(tmp_path / "hf"))
    rows = list(ds["train"])
    assert [r["extra_info"]["sample_id"] for r in rows] == want.kept
    for i, row in enumerate(rows):
        sid = row["extra_info"]["sample_id"]
        assert row["data_source"] == "math"  # the kind of task its grader scores
        assert row["prompt"] == chat_prompt(want.question[sid])
        assert row["ability"] == "math"
        assert row["reward_model"] == {"style": "rule", "ground_truth": want.answer[sid]}
        assert row["extra_info"]["index"] == i
        assert_stats(row["extra_info"], want.stats[sid])
    # pyarrow and polars agree with datasets.
    assert pq.read_table(out).to_pylist() == rows
    assert frame_rows(pl.read_parquet(out)) == rows


def test_verl_input_keeps_its_own_fields(cli, tmp_path: Path, outdir: Path) -> None:
    """A verl data set evaluated and exported back keeps data_source, ability,
    reward_model.style and its extra_info fields; curate adds its statistics."""
    from curate.evaluation.evaluate import evaluate

    source = [
        {
            "data_source": "openai/gsm8k" if i % 2 else "lighteval/MATH",
            "prompt": [{"role": "user", "content": f"Compute {i} * 3."}],
            "ability": "arithmetic",
            "reward_model": {"style": "rule", "ground_truth": str(3 * i)},
            "extra_info": {"split": "train", "index": 1000 + i},
        }
        for i in range(9)
    ]
    data = tmp_path / "verl.parquet"
    pl.DataFrame(source).write_parquet(data)
    answers = {f"Compute {i} * 3.": (str(3 * i), (0.0, 1.0, 0.5)[i % 3]) for i in range(9)}
    run = tmp_path / "run"
    evaluate(fake_eval_options(data, run, answers, runs=8))
    out = outdir / "again.parquet"
    result = cli("filter", run, "--keep", "all", "--format", "verl", "-o", out)
    assert result.exit_code == 0, result.stderr
    got = pq.read_table(out).to_pylist()
    by_index = {r["extra_info"]["index"]: r for r in source}
    assert len(got) == len(source)
    for row in got:
        original = by_index[row["extra_info"]["index"]]
        assert row["data_source"] == original["data_source"]
        assert row["prompt"] == original["prompt"]
        assert row["ability"] == "arithmetic"
        assert row["reward_model"] == original["reward_model"]
        assert row["extra_info"]["split"] == "train"
        assert row["extra_info"]["n_rollouts"] == 8
    assert set(by_index) == {r["extra_info"]["index"] for r in got}


def test_verl_data_source_option_wins(cli, chat_run: Path, outdir: Path) -> None:
    out = outdir / "t.parquet"
    args = ("filter", chat_run, "--format", "verl", "--data-source", "openai/gsm8k", "-o", out)
    assert cli(*args).exit_code == 0
    assert set(pl.read_parquet(out)["data_source"].to_list()) == {"openai/gsm8k"}


def test_verl_with_no_kept_rows_keeps_the_schema(cli, chat_run: Path, outdir: Path) -> None:
    out = outdir / "none.parquet"
    args = ("--pass-rate", "0.99:1", "--allow-empty")
    result = cli("filter", chat_run, "--format", "verl", *args, "-o", out)
    assert result.exit_code == 0, result.stderr
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert table.schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert pa.types.is_struct(table.schema.field("reward_model").type)
