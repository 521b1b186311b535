"""Every bad-input path: exit 2, one line on stderr naming the file and the problem,
no traceback, and nothing new in the input or output directories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from curate.errors import InputError
from curate.store.run_dir import RolloutStore


def _csv(text: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / "scores.csv"
        path.write_text(text, encoding="utf-8")
        return path

    return make


def _missing(d: Path) -> Path:
    return d / "nope.csv"


def _plain_dir(d: Path) -> Path:
    path = d / "not_a_run"
    path.mkdir()
    (path / "notes.txt").write_text("hello")
    return path


def _unknown_format(d: Path) -> Path:
    path = d / "scores.xlsx"
    path.write_text("sample_id,score\na,1\n")
    return path


def _nan_parquet(d: Path) -> Path:
    path = d / "scores.parquet"
    pl.DataFrame({"sample_id": ["a", "a"], "score": [1.0, float("nan")]}).write_parquet(path)
    return path


def _parquet(data: dict[str, list[object]], **schema: object) -> Callable[[Path], Path]:
    """A Parquet table: `curate report` reads these through its own one-pass loader."""

    def make(d: Path) -> Path:
        path = d / "scores.parquet"
        pl.DataFrame(data, schema_overrides=schema or None).write_parquet(path)  # type: ignore[arg-type]
        return path

    return make


def _empty_run(d: Path) -> Path:
    store = RolloutStore(d / "run")
    store.create()
    store.write_manifest({"model": "m"})
    return store.run_dir


def _bad_manifest(d: Path) -> Path:
    run = d / "run"
    (run / "rollouts").mkdir(parents=True)
    (run / "manifest.json").write_text("{not json")
    return run


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing-file": (_missing, "no such file"),
    "not-a-run-dir": (_plain_dir, "not a run directory"),
    "missing-columns": (_csv("sample_id,reward\na,1\n"), "missing required column(s) score"),
    "non-numeric": (_csv("sample_id,score\na,1\na,correct\n"), "score is not numeric"),
    "nan-csv": (_csv("sample_id,score\na,1\na,NaN\n"), "score is NaN"),
    "nan-parquet": (_nan_parquet, "score is NaN"),
    "parquet-missing-columns": (
        _parquet({"sample_id": ["a"], "reward": [1.0]}),
        "missing required column(s) score",
    ),
    "parquet-above-one": (
        _parquet({"sample_id": ["a", "a"], "score": [1.0, 2.0]}),
        "outside [0, 1]",
    ),
    "parquet-null-id": (_parquet({"sample_id": ["a", None], "score": [1.0, 0.0]}), "sample_id"),
    "parquet-null-score": (
        _parquet({"sample_id": ["a", "a"], "score": [1.0, None]}),
        "neither a score nor an error",
    ),
    "parquet-empty": (_parquet({"sample_id": [], "score": []}, sample_id=pl.String), "empty"),
    "parquet-conflict": (
        _parquet({"sample_id": ["a", "a"], "rollout_idx": [0, 0], "score": [1.0, 0.0]}),
        "conflicting rows",
    ),
    "above-one": (_csv("sample_id,score\na,1\na,2\n"), "outside [0, 1]"),
    "negative": (_csv("sample_id,score\na,-1\n"), "outside [0, 1]"),
    "empty-table": (_csv("sample_id,score\n"), "table is empty"),
    "empty-file": (_csv(""), "cannot read table"),
    "conflicting-duplicates": (
        _csv("sample_id,rollout_idx,score\na,0,1\na,1,0\na,0,0\n"),
        "conflicting rows for sample 'a' run 0",
    ),
    "unknown-format": (_unknown_format, "unknown table format '.xlsx'"),
    "empty-run-dir": (_empty_run, "no rollouts"),
    "bad-manifest": (_bad_manifest, "manifest is not valid JSON"),
}


def command(name: str, path: Path, outdir: Path) -> list[object]:
    return {
        "report": ["report", path],
        "report-json": ["report", path, "--format", "json"],
        "plot": ["plot", path, "-o", outdir / "plot.png"],
        "plot-default-output": ["plot", path],
        "filter": ["filter", path, "-o", outdir / "kept.jsonl"],
    }[name]


def assert_one_line_error(stderr: str, *fragments: object) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("curate: error: "), lines[0]
    for fragment in fragments:
        assert str(fragment) in lines[0], (fragment, lines[0])
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("cmd", ["report", "report-json", "plot", "plot-default-output", "filter"])
def test_bad_input(cli, inputs: Path, outdir: Path, snapshot, case: str, cmd: str) -> None:
    make, problem = CASES[case]
    path = make(inputs)
    before = snapshot(inputs, outdir)
    result = cli(*command(cmd, path, outdir))
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    line = assert_one_line_error(result.stderr, problem)
    assert str(path) in line  # names the file (or, for a manifest, the file inside it)
    assert result.stdout == ""
    assert snapshot(inputs, outdir) == before


def test_exact_duplicates_are_fine(cli, inputs: Path) -> None:
    path = _csv("sample_id,rollout_idx,score\na,0,1\na,1,0\na,0,1\n")(inputs)
    result = cli("report", path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert '"rollouts": 2' in result.stdout


# ---------------------------------------------------------------- filter options


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--pass-rate", "0.9:0.1"], ["--pass-rate", "0.9:0.1"]),
        (["--pass-rate", "half"], ["--pass-rate", "LO:HI"]),
        (["--pass-rate", "0:2"], ["--pass-rate"]),
        (["--keep", "learnable"], ["unknown --keep value 'learnable'", "high-variance"]),
        (["--keep", "high-variance", "--keep", "bogus"], ["'bogus'"]),
    ],
)
def test_filter_bad_options(cli, scores_csv, outdir: Path, snapshot, args, fragments) -> None:
    before = snapshot(scores_csv.parent, outdir)
    result = cli("filter", scores_csv, "-o", outdir / "kept.jsonl", *args)
    assert result.exit_code == 2
    assert_one_line_error(result.stderr, *fragments)
    assert snapshot(scores_csv.parent, outdir) == before


@pytest.mark.parametrize(
    ("name", "fragment"),
    [("kept.csv", "filter writes .jsonl or .parquet"), ("kept.txt", "unknown table format '.txt'")],
)
def test_filter_bad_output_format(cli, scores_csv, outdir: Path, snapshot, name, fragment) -> None:
    before = snapshot(scores_csv.parent, outdir)
    result = cli("filter", scores_csv, "-o", outdir / name)
    assert result.exit_code == 2
    assert_one_line_error(result.stderr, outdir / name, fragment)
    assert snapshot(scores_csv.parent, outdir) == before


def test_filter_creates_a_missing_output_directory(cli, scores_csv, tmp_path: Path) -> None:
    result = cli("filter", scores_csv, "-o", tmp_path / "missing" / "kept.jsonl")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "missing").iterdir()) == [
        "kept.jsonl",
        "kept.rejects.jsonl",
    ]


def test_filter_bad_data_file(cli, scores_csv, inputs: Path, outdir: Path, snapshot) -> None:
    missing = inputs / "nope.jsonl"
    no_id = inputs / "data.jsonl"
    no_id.write_text('{"question": "q"}\n')
    dup = inputs / "dup.jsonl"
    dup.write_text('{"sample_id": "q01"}\n{"sample_id": "q01"}\n')
    before = snapshot(inputs, outdir)
    for data, needle in [
        (missing, "no such file"),
        (no_id, "column to match sample ids"),
        (dup, "duplicate values"),
    ]:
        result = cli("filter", scores_csv, "--data", data, "-o", outdir / "k.jsonl")
        assert result.exit_code == 2
        assert_one_line_error(result.stderr, data, needle)
        assert snapshot(inputs, outdir) == before


def test_filter_write_failure_leaves_no_output(
    cli, run_dir: Path, outdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept file and the rejects appear together or not at all."""
    import curate.filtering.run as filter_cmd

    real = filter_cmd.write_rejects

    def failing(frame: object, tmp: Path, final: Path) -> None:
        real(frame, tmp, final)
        if ".rejects" in final.name:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(filter_cmd, "write_rejects", failing)
    result = cli("filter", run_dir, "-o", outdir / "kept.jsonl")
    assert result.exit_code != 0
    assert_one_line_error(result.stderr, "No space left on device")
    assert list(outdir.iterdir()) == []


# ---------------------------------------------------------------- typer-level usage errors


@pytest.mark.parametrize(
    "args",
    [
        ["report", "x.csv", "--format", "xml"],
        ["plot", "x.csv", "--kind", "pie"],
        ["report", "x.csv", "--threshold", "-1"],
        ["report", "x.csv", "--group-size", "0"],
        ["filter", "x.csv"],  # -o is required
        ["report"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(cli, args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- real processes


@pytest.mark.parametrize(
    ("case", "cmd"),
    [
        ("missing-file", "report"),
        ("not-a-run-dir", "plot-default-output"),
        ("nan-csv", "report-json"),
        ("conflicting-duplicates", "filter"),
        ("unknown-format", "plot"),
    ],
)
def test_bad_input_in_a_real_process(
    run_curate, inputs: Path, outdir: Path, snapshot, case: str, cmd: str
) -> None:
    make, problem = CASES[case]
    path = make(inputs)
    before = snapshot(inputs, outdir)
    proc = run_curate(*command(cmd, path, outdir))
    assert proc.returncode == 2, proc.stderr
    line = assert_one_line_error(proc.stderr, problem)
    assert str(path) in line
    assert proc.stdout == ""
    assert snapshot(inputs, outdir) == before


def test_bad_option_in_a_real_process(run_curate, scores_csv: Path, outdir: Path) -> None:
    proc = run_curate("filter", scores_csv, "-o", outdir / "k.jsonl", "--keep", "nope")
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, "unknown --keep value 'nope'")
    proc = run_curate("plot", scores_csv, "-o", outdir / "p.bmp")
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr, outdir / "p.bmp", "unknown plot format '.bmp'")
    assert list(outdir.iterdir()) == []


def test_curate_debug_shows_the_traceback(run_curate, inputs: Path) -> None:
    path = _csv("sample_id,score\na,1\na,NaN\n")(inputs)
    quiet = run_curate("report", path)
    assert "Traceback" not in quiet.stderr
    loud = run_curate("report", path, env={"CURATE_DEBUG": "1"})
    assert loud.returncode != 0
    assert "Traceback (most recent call last)" in loud.stderr
    assert "InputError" in loud.stderr and "score is NaN" in loud.stderr


def test_curate_debug_in_process(cli, inputs: Path) -> None:
    path = _missing(inputs)
    result = cli("report", path, env={"CURATE_DEBUG": "1"})
    assert result.exit_code != 0
    assert isinstance(result.exception, InputError)
    assert "no such file" in str(result.exception)
    for off in ("0", ""):
        quiet = cli("report", path, env={"CURATE_DEBUG": off})
        assert quiet.exit_code == 2 and not isinstance(quiet.exception, InputError)
