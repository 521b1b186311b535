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


# --weights TABLE: every kept sample needs a weight, or an explicit --weight-default.


def write_weights(path: Path, ids: list[str], weights: list[object]) -> Path:
    pl.DataFrame({"sample_id": ids, "weight": weights}, strict=False).write_csv(path)
    return path


def test_partial_weight_table_is_refused_and_nothing_written(
    cli, run_dir: Path, inputs: Path, outdir: Path
) -> None:
    table = write_weights(inputs / "w.csv", ["q01", "q05"], [2.0, 3.0])  # q05 is not kept
    result = cli("filter", run_dir, "--weights", table, "-o", outdir / "kept.jsonl")
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"curate: error: {table}: ")
    assert "no weight for 3 of 4 kept samples (q02, q03, q04)" in lines[0]
    assert "--weight-default" in lines[0]
    assert list(outdir.iterdir()) == []


def test_partial_weight_table_names_the_first_few(
    cli, run_dir: Path, inputs: Path, outdir: Path
) -> None:
    table = write_weights(inputs / "w.csv", ["q99"], [1.0])
    result = cli("filter", run_dir, "--keep", "all", "--weights", table, "-o", outdir / "k.jsonl")
    assert result.exit_code == 2
    assert "no weight for 12 of 12 kept samples (q01, q02, q03, q04, q05, ...)" in result.stderr
    assert list(outdir.iterdir()) == []


def test_weight_default_fills_the_gaps_and_says_so(
    cli, run_dir: Path, inputs: Path, outdir: Path
) -> None:
    table = write_weights(inputs / "w.csv", ["q01", "q03"], [2.0, 0.0])
    out = outdir / "kept.jsonl"
    result = cli("filter", run_dir, "--weights", table, "--weight-default", "1", "-o", out)
    assert result.exit_code == 0, result.stderr
    by = dict(read(out).select("sample_id", "weight").rows())
    assert by == {"q01": 2.0, "q02": 1.0, "q03": 0.0, "q04": 1.0}
    assert f"2 of 4 kept samples had no weight in {table}; gave them --weight-default 1" in (
        result.stderr
    )
    assert "--weight-default" not in result.stdout  # the note is on stderr


def test_full_weight_table_needs_no_default(cli, run_dir: Path, inputs: Path, outdir: Path) -> None:
    # A repeated sample with the same weight is fine; rows for dropped samples too.
    ids = [*HIGH_VARIANCE, "q01", "q08"]
    table = write_weights(inputs / "w.csv", ids, [1.0, 2.0, 3.0, 4.0, 1.0, 9.0])
    out = outdir / "kept.jsonl"
    result = cli("filter", run_dir, "--weights", table, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert read(out)["weight"].to_list() == [1.0, 2.0, 3.0, 4.0]
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("ids", "weights", "needle"),
    [
        (["q01", "q01"], [1.0, 2.0], "more than once with different weights (first: 'q01': 1, 2)"),
        (["q01", "q02"], ["1.5", "heavy"], "1 weight(s) are not finite numbers >= 0 "),
        (["q01", "q02"], [1.0, float("nan")], "(first: sample 'q02' has nan)"),
        (["q01", "q02"], [1.0, -0.5], "(first: sample 'q02' has -0.5)"),
        (["q01", "q02"], [1.0, float("inf")], "(first: sample 'q02' has inf)"),
        (["q01", "q02"], [1.0, None], "(first: sample 'q02' has an empty cell)"),
    ],
)
def test_bad_weight_tables_are_one_line_exit_2(
    cli, run_dir: Path, inputs: Path, outdir: Path, ids, weights, needle: str
) -> None:
    table = write_weights(inputs / "w.csv", ids, weights)
    result = cli(
        "filter", run_dir, "--weights", table, "--weight-default", "1", "-o", outdir / "k.jsonl"
    )
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert str(table) in lines[0]
    assert list(outdir.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--weight-default", "1"], "--weight-default fills gaps in a --weights table"),
        (["--weights", "log", "--weight-default", "1"], "an objective"),
        (["--weights", "TABLE", "--weight-default", "-1"], "finite number >= 0 (got -1.0)"),
        (["--weights", "TABLE", "--weight-default", "nan"], "finite number >= 0 (got nan)"),
    ],
)
def test_weight_default_usage_errors(
    cli, run_dir: Path, inputs: Path, outdir: Path, args: list[str], needle: str
) -> None:
    table = write_weights(inputs / "w.csv", ["q01"], [1.0])
    args = [str(table) if a == "TABLE" else a for a in args]
    result = cli("filter", run_dir, *args, "-o", outdir / "k.jsonl")
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert list(outdir.iterdir()) == []


def test_partial_weight_table_in_a_real_process(
    run_curate, run_dir: Path, inputs: Path, outdir: Path
) -> None:
    table = write_weights(inputs / "w.csv", ["q01"], [2.0])
    out = outdir / "kept.parquet"
    refused = run_curate("filter", run_dir, "--weights", table, "-o", out)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "no weight for 3 of 4 kept samples" in refused.stderr
    assert list(outdir.iterdir()) == []
    filled = run_curate("filter", run_dir, "--weights", table, "--weight-default", "0.5", "-o", out)
    assert filled.returncode == 0, filled.stderr
    assert "3 of 4 kept samples had no weight" in filled.stderr
    assert pl.read_parquet(out)["weight"].to_list() == [2.0, 0.5, 0.5, 0.5]


# --help at 80 columns: the -o forms stated, option names whole, defaults shown.


def test_filter_help_at_80_columns(run_curate) -> None:
    proc = run_curate("filter", "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # nothing cut
    for name in (
        "--output",
        "--format",
        "--keep",
        "--pass-rate",
        "--weights",
        "--weight-default",
        "--weight-delta",
        "--weight-column",
        "--plan",
        "--no-stats",
        "--prompt-field",
        "--answer-field",
        "--data-source",
        "--id-field",
        "--threshold",
        "--group-size",
    ):
        assert name in text, name
    assert "-o runs/x/train writes the directory" in text
    assert "runs/x/train/ (for datasets.load_from_disk) and runs/x/train.parquet" in text
    assert "-o runs/x/train.jsonl" in text and "-o runs/x/train.parquet" in text
    for default in ("[default: high-variance]", "[default: 0.05]", "[default: weight]"):
        assert default in text
    assert "[default: 0.01]" in text and "[default: 8]" in text
    assert "seed" not in text.lower()


def test_trl_output_name_as_help_says(cli, run_dir: Path, outdir: Path) -> None:
    pytest.importorskip("datasets")
    result = cli("filter", run_dir, "--format", "trl", "-o", outdir / "train")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in outdir.iterdir()) == [
        "train",
        "train.parquet",
        "train.rejects.jsonl",
    ]
    assert (outdir / "train").is_dir()


def test_weight_table_of_other_ids_says_so(cli, run_dir: Path, inputs: Path, outdir: Path) -> None:
    table = write_weights(inputs / "w.csv", ["1", "2"], [1.0, 1.0])
    result = cli("filter", run_dir, "--weights", table, "-o", outdir / "k.jsonl")
    assert result.exit_code == 2
    assert "none of the table's ids is a kept sample (its first: '1')" in result.stderr
    assert list(outdir.iterdir()) == []


# ---------------------------------------------------------------- --suspects


@pytest.fixture
def suspect_run(inputs: Path) -> Path:
    from tests.report.suspect_run import write_suspect_run

    return write_suspect_run(inputs / "suspects")


def test_filter_suspects_drop(cli, suspect_run: Path, outdir: Path) -> None:
    from tests.report.suspect_run import SAMPLES, SUSPECTS

    out = outdir / "train.jsonl"
    result = cli("filter", suspect_run, "-o", out, "--keep", "all", "--suspects", "drop")
    assert result.exit_code == 0, result.stderr
    kept = read(out)["sample_id"].to_list()
    assert sorted(kept) == sorted(set(SAMPLES) - set(SUSPECTS))
    rejects = read(outdir / "train.rejects.jsonl")
    assert dict(rejects.select("sample_id", "drop_reason").rows()) == dict.fromkeys(
        SUSPECTS, "suspect_label"
    )
    assert "suspect labels: 3 (majority answer graded wrong)" in result.stdout
    assert "suspect_label" in result.stdout  # among the drop reasons


def test_filter_suspects_drop_comes_before_the_category(
    cli, suspect_run: Path, outdir: Path
) -> None:
    out = outdir / "train.jsonl"
    result = cli("filter", suspect_run, "-o", out, "--suspects", "drop")
    assert result.exit_code == 0, result.stderr
    reasons = dict(read(outdir / "train.rejects.jsonl").select("sample_id", "drop_reason").rows())
    # Always incorrect too, but the rejects say to check the reference.
    assert reasons["bad1"] == "suspect_label"
    assert reasons["hard1"] == "always_incorrect"


def test_filter_suspects_only(cli, suspect_run: Path, outdir: Path) -> None:
    from tests.report.suspect_run import SUSPECTS

    out = outdir / "relabel.jsonl"
    result = cli("filter", suspect_run, "-o", out, "--suspects", "only")
    assert result.exit_code == 0, result.stderr
    kept = read(out)
    assert kept["sample_id"].to_list() == SUSPECTS  # every category, not just high-variance
    assert kept["answer"].to_list() == ["41", "100", "London"]
    rejects = read(outdir / "relabel.rejects.jsonl")
    assert set(rejects["drop_reason"]) == {"not a suspect label"}
    # An explicit --keep still applies: of the three, only bad2 is high-variance.
    narrow = cli("filter", suspect_run, "-o", out, "--suspects", "ONLY", "--keep", "high-variance")
    assert narrow.exit_code == 0, narrow.stderr
    assert read(out)["sample_id"].to_list() == ["bad2"]


def test_filter_suspects_keep_is_the_default(cli, suspect_run: Path, outdir: Path) -> None:
    default = cli("filter", suspect_run, "-o", outdir / "a.jsonl", "--keep", "all")
    keep = cli(
        "filter", suspect_run, "-o", outdir / "b.jsonl", "--keep", "all", "--suspects", "keep"
    )
    assert default.exit_code == keep.exit_code == 0
    assert read(outdir / "a.jsonl").equals(read(outdir / "b.jsonl"))
    assert read(outdir / "a.jsonl").height == 10
    assert "suspect labels" not in default.stdout


def test_bad_suspects_value_is_one_line_and_writes_nothing(
    cli, suspect_run: Path, outdir: Path, snapshot
) -> None:
    before = snapshot(outdir, suspect_run)
    result = cli("filter", suspect_run, "-o", outdir / "k.jsonl", "--suspects", "remove")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "curate: error: unknown --suspects value 'remove' (choose from keep, drop, only)"
    ]
    assert snapshot(outdir, suspect_run) == before


def test_suspects_without_answers_is_one_line_and_writes_nothing(
    cli, scores_csv: Path, outdir: Path, snapshot
) -> None:
    before = snapshot(outdir)
    result = cli("filter", scores_csv, "-o", outdir / "k.jsonl", "--suspects", "drop")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--suspects drop: the check needs extracted answers" in lines[0]
    assert snapshot(outdir) == before
