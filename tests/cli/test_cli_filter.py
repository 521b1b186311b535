"""`curate filter`: kept samples with their original fields, rejects with a drop_reason."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from .conftest import HIGH_VARIANCE, SCORES, original_samples


def read(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_ndjson(path)


def test_filter_run_dir_keeps_original_fields(cli, run_dir: Path, outdir: Path) -> None:
    out = outdir / "train.jsonl"
    result = cli("filter", run_dir, "-o", out)
    assert result.exit_code == 0, result.stderr
    kept = read(out)
    rejects = read(outdir / "train.rejects.jsonl")
    assert sorted(p.name for p in outdir.iterdir()) == ["train.jsonl", "train.rejects.jsonl"]

    assert kept["sample_id"].to_list() == HIGH_VARIANCE  # in the samples file's order
    original = original_samples()
    for column in original.columns:
        assert column in kept.columns
    assert kept.select(original.columns).equals(
        original.filter(pl.col("sample_id").is_in(HIGH_VARIANCE))
    )
    for column in ("pass_rate", "variance", "n_rollouts"):
        assert column in kept.columns
    assert "drop_reason" not in kept.columns and "kept" not in kept.columns
    q04 = kept.filter(pl.col("sample_id") == "q04").row(0, named=True)
    assert q04["n_rollouts"] == 3  # the failed rollout is not counted
    assert q04["pass_rate"] == pytest.approx(2 / 3)
    assert q04["variance"] == pytest.approx(2 / 9)

    assert rejects.height == len(SCORES) - len(HIGH_VARIANCE)
    reasons = dict(rejects.select("sample_id", "drop_reason").rows())
    assert reasons["q05"] == "always_correct"
    assert reasons["q08"] == "always_incorrect"
    assert reasons["q11"] == "low_variance"
    assert "question" in rejects.columns

    assert f"kept 4 of 12 samples -> {out}" in result.stdout
    assert "dropped 8 -> " in result.stdout
    assert "always_correct" in result.stdout and "low_variance" in result.stdout


def test_filter_bare_table_with_data(cli, scores_csv: Path, samples_jsonl: Path, outdir: Path):
    out = outdir / "kept.parquet"
    result = cli("filter", scores_csv, "--data", samples_jsonl, "-o", out)
    assert result.exit_code == 0, result.stderr
    kept = read(out)
    assert kept["sample_id"].to_list() == HIGH_VARIANCE
    assert kept["question"].to_list() == original_samples()["question"].to_list()[:4]
    assert kept["meta"].to_list()[0] == {"source": "unit", "level": 0}
    rejects = read(outdir / "kept.rejects.parquet")
    assert set(rejects["drop_reason"].to_list()) == {
        "always_correct",
        "always_incorrect",
        "low_variance",
    }


def test_filter_data_with_id_column(cli, scores_csv: Path, inputs: Path, outdir: Path) -> None:
    data = inputs / "data.jsonl"
    original_samples().rename({"sample_id": "id"}).write_ndjson(data)
    out = outdir / "kept.jsonl"
    result = cli("filter", scores_csv, "--data", data, "-o", out)
    assert result.exit_code == 0, result.stderr
    kept = read(out)
    assert kept["id"].to_list() == HIGH_VARIANCE
    assert kept.columns[:4] == ["id", "question", "answer", "meta"]


def test_filter_bare_table_without_data(cli, scores_csv: Path, outdir: Path) -> None:
    out = outdir / "kept.jsonl"
    assert cli("filter", scores_csv, "-o", out).exit_code == 0
    kept = read(out)
    assert kept["sample_id"].to_list() == HIGH_VARIANCE
    assert {"pass_rate", "variance", "n_rollouts"} <= set(kept.columns)


def test_filter_keep_and_pass_rate(cli, run_dir: Path, outdir: Path) -> None:
    out = outdir / "kept.jsonl"
    result = cli(
        "filter",
        run_dir,
        "--keep",
        "high-variance",
        "--keep",
        "always-correct",
        "--pass-rate",
        "0.3:1",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.stderr
    # q02 (pass rate 0.25) drops; always-correct samples (pass rate 1) stay.
    assert read(out)["sample_id"].to_list() == ["q01", "q03", "q04", "q05", "q06", "q07"]
    reasons = dict(read(outdir / "kept.rejects.jsonl").select("sample_id", "drop_reason").rows())
    assert reasons["q02"] == "pass_rate 0.25 outside [0.3, 1.0]"


def test_filter_keep_all(cli, run_dir: Path, outdir: Path) -> None:
    out = outdir / "all.jsonl"
    assert cli("filter", run_dir, "--keep", "all", "-o", out).exit_code == 0
    assert read(out).height == len(SCORES)
    assert (outdir / "all.rejects.jsonl").read_text() == ""  # zero JSON lines


def test_filter_threshold(cli, run_dir: Path, outdir: Path) -> None:
    out = outdir / "kept.jsonl"
    assert cli("filter", run_dir, "--threshold", "0.2", "-o", out).exit_code == 0
    assert read(out)["sample_id"].to_list() == ["q01", "q04"]


def test_filter_overwrites_atomically(cli, run_dir: Path, outdir: Path) -> None:
    out = outdir / "kept.jsonl"
    out.write_text("old\n")
    assert cli("filter", run_dir, "-o", out).exit_code == 0
    assert read(out).height == len(HIGH_VARIANCE)
    assert sorted(p.name for p in outdir.iterdir()) == ["kept.jsonl", "kept.rejects.jsonl"]


def test_filter_in_a_real_process(run_curate, run_dir: Path, outdir: Path) -> None:
    out = outdir / "kept.jsonl"
    proc = run_curate("filter", run_dir, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert read(out)["sample_id"].to_list() == HIGH_VARIANCE
    assert (outdir / "kept.rejects.jsonl").is_file()


@pytest.fixture
def saved_dict(inputs: Path) -> Path:
    """The samples as a DatasetDict saved with save_to_disk: the `test` split holds them,
    the `train` split the same ids with other questions (so a wrong pick shows)."""
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    test = original_samples()
    train = test.with_columns(pl.lit("a train question").alias("question"))
    path = inputs / "hf_dict"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_polars(train),
            "test": datasets.Dataset.from_polars(test),
        }
    ).save_to_disk(str(path))
    return path


def test_filter_data_split_picks_that_split(
    cli, scores_csv: Path, saved_dict: Path, outdir: Path
) -> None:
    out = outdir / "kept.jsonl"
    result = cli("filter", scores_csv, "--data", saved_dict, "--split", "test", "-o", out)
    assert result.exit_code == 0, result.stderr
    kept = read(out)
    assert kept["sample_id"].to_list() == HIGH_VARIANCE
    assert kept["question"].to_list() == original_samples()["question"].to_list()[:4]
    train = cli("filter", scores_csv, "--data", saved_dict, "--split", "train", "-o", out)
    assert train.exit_code == 0, train.stderr
    assert set(read(out)["question"].to_list()) == {"a train question"}


def test_filter_data_missing_split_is_one_line(
    cli, scores_csv: Path, saved_dict: Path, outdir: Path
) -> None:
    out = outdir / "kept.jsonl"
    result = cli("filter", scores_csv, "--data", saved_dict, "--split", "validation", "-o", out)
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("curate: error: ") and str(saved_dict) in lines[0]
    assert "no split 'validation' (have: train, test)" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert list(outdir.iterdir()) == []  # no output, no rejects


def test_filter_split_needs_data(cli, run_dir: Path, outdir: Path) -> None:
    result = cli("filter", run_dir, "--split", "test", "-o", outdir / "kept.jsonl")
    assert result.exit_code == 2
    assert "--split picks a split of --data" in result.stderr
    assert list(outdir.iterdir()) == []
