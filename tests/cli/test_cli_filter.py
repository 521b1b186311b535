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
