"""`--format trl`: loaded with `datasets` both ways TRL users load data (load_from_disk
and the Parquet builder), and through TRL's own prompt handling where TRL installs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from curate.exports import prepare_batch, write_export
from curate.exports.trl import trl_paths

from .conftest import SYSTEM, assert_stats, chat_prompt, expected, render

datasets = pytest.importorskip("datasets")

COLUMNS = [
    "prompt",
    "solution",
    "id",
    "question",
    "answer",
    "meta",
    "sample_id",
    "pass_rate",
    "smoothed_pass_rate",
    "variance",
    "n_rollouts",
]


def _export(cli, run: Path, out: Path, *args: object) -> str:
    result = cli("filter", run, "--format", "trl", "-o", out, *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_trl_save_to_disk_and_parquet_round_trip(
    cli, chat_run: Path, outdir: Path, tmp_path: Path
) -> None:
    out = outdir / "grpo"
    stdout = _export(cli, chat_run, out)
    want = expected(chat_run)
    assert sorted(p.name for p in outdir.iterdir()) == [
        "grpo",
        "grpo.parquet",
        "grpo.rejects.jsonl",
    ]
    from_disk = datasets.load_from_disk(str(out))
    from_parquet = datasets.load_dataset(
        "parquet", data_files=str(outdir / "grpo.parquet"), cache_dir=str(tmp_path / "hf")
    )["train"]
    for ds in (from_disk, from_parquet):
        assert ds.column_names == COLUMNS
        assert (
            ds.features["prompt"]
            == datasets.Features(
                {"p": [{"role": datasets.Value("string"), "content": datasets.Value("string")}]}
            )["p"]
        )
        assert ds.features["n_rollouts"] == datasets.Value("int64")
        rows = list(ds)
        assert [r["sample_id"] for r in rows] == want.kept
        for row in rows:
            sid = row["sample_id"]
            assert row["prompt"] == chat_prompt(want.question[sid])
            assert row["solution"] == want.answer[sid]
            # The input's columns, with their own types.
            assert row["id"] == sid and row["question"] == want.question[sid]
            assert str(row["answer"]) == want.answer[sid] and isinstance(row["answer"], int)
            assert row["meta"] == {"level": int(sid[1:]) % 3}
            assert_stats(row, want.stats[sid])
    assert f"load_from_disk('{out}')" in stdout


def test_trl_completion_mode_writes_plain_prompts(cli, completion_run: Path, outdir: Path) -> None:
    out = outdir / "plain"
    _export(cli, completion_run, out)
    ds = datasets.load_from_disk(str(out))
    assert ds.features["prompt"] == datasets.Value("string")
    want = expected(completion_run)
    assert len(ds) == len(want.kept) > 0
    for row in ds:
        # Exactly the text `curate eval --mode completion` sent.
        assert row["prompt"] == f"{SYSTEM}\n\n{want.question[row['sample_id']]}"


def test_trl_prompts_go_through_trls_own_handling(
    cli, chat_run: Path, completion_run: Path, outdir: Path, chat_tokenizer
) -> None:
    trl_data = pytest.importorskip("trl.data_utils")
    _export(cli, chat_run, outdir / "chat")
    _export(cli, completion_run, outdir / "plain")
    chat = datasets.load_from_disk(str(outdir / "chat"))
    plain = datasets.load_from_disk(str(outdir / "plain"))
    for row in chat:
        assert trl_data.is_conversational(row)
        rendered = trl_data.maybe_apply_chat_template(row, chat_tokenizer)["prompt"]
        assert rendered == render(row["prompt"])
    for row in plain:
        assert not trl_data.is_conversational(row)
        assert trl_data.maybe_apply_chat_template(row, chat_tokenizer)["prompt"] == row["prompt"]


def test_trl_dot_parquet_output_name(cli, chat_run: Path, outdir: Path) -> None:
    _export(cli, chat_run, outdir / "grpo.parquet")
    assert (outdir / "grpo").is_dir() and (outdir / "grpo.parquet").is_file()
    assert (outdir / "grpo.rejects.parquet").is_file()
    assert trl_paths(Path("x/y.pq")) == (Path("x/y"), Path("x/y.parquet"))


def test_trl_replaces_its_own_earlier_export(cli, chat_run: Path, outdir: Path) -> None:
    out = outdir / "grpo"
    _export(cli, chat_run, out)
    _export(cli, chat_run, out, "--keep", "all")
    assert len(datasets.load_from_disk(str(out))) == 12
    assert not [p for p in outdir.iterdir() if p.name.startswith(".")]  # no temp left


def test_trl_never_replaces_a_foreign_directory(cli, chat_run: Path, outdir: Path) -> None:
    victim = outdir / "notes"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    result = cli("filter", chat_run, "--format", "trl", "-o", victim)
    assert result.exit_code == 2
    assert "was not written by this export" in result.stderr
    assert (victim / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in outdir.iterdir()) == ["notes"]


def test_trl_failed_write_leaves_nothing(
    cli, chat_run: Path, outdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory, the Parquet file and the rejects appear together or not at all."""

    def full_disk(self: object, *args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(datasets.Dataset, "to_parquet", full_disk)
    result = cli("filter", chat_run, "--format", "trl", "-o", outdir / "grpo")
    assert result.exit_code != 0
    assert "No space left on device" in result.stderr
    assert os.listdir(outdir) == []


def test_trl_library_call_with_weights(chat_run: Path, tmp_path: Path) -> None:
    """The export API: kept rows + a per-sample weight frame -> a TRL dataset."""
    import polars as pl

    from curate.data.samples import resolve_fields
    from curate.store.run_dir import RolloutStore

    samples = RolloutStore(chat_run).read_samples()
    assert samples is not None
    stats = expected(chat_run).stats
    rows = samples.with_columns(
        pl.col("sample_id")
        .replace_strict({k: v["pass_rate"] for k, v in stats.items()}, return_dtype=pl.Float64)
        .alias("pass_rate")
    )
    weights = pl.DataFrame({"sample_id": ["q00", "q05"], "weight": [0.5, 2]})
    batch = prepare_batch(
        rows,
        fields=resolve_fields(samples),
        system="S",
        weights=weights,
        weight_column="w",
    )
    result = write_export("trl", batch, tmp_path / "lib")
    ds = datasets.load_from_disk(str(result.paths[0]))
    assert ds.column_names == [
        "prompt",
        "solution",
        "id",
        "question",
        "answer",
        "meta",
        "sample_id",
        "pass_rate",
        "w",
    ]
    by_id = {r["sample_id"]: r for r in ds}
    assert by_id["q05"]["w"] == 2.0 and by_id["q00"]["w"] == 0.5 and by_id["q01"]["w"] is None
    assert by_id["q01"]["prompt"][0] == {"role": "system", "content": "S"}
