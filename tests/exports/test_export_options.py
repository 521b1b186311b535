"""The registry, the generic formats, and the options every export shares: statistics
on or off, per-sample weights, field overrides, bare score tables with --data."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from curate.errors import UsageError
from curate.exports import FORMATS, format_for_output, get_format
from tests.conftest import fake_eval_options

from .conftest import STATS, assert_stats, chat_prompt, expected, read_jsonl

TRAINER = ["verl", "trl", "openrlhf", "openai-rft"]
OUT_NAME = {
    "jsonl": "k.jsonl",
    "parquet": "k.parquet",
    "verl": "k.parquet",
    "trl": "k",
    "openrlhf": "k.jsonl",
    "openai-rft": "k.jsonl",
}


def records(fmt: str, out: Path) -> list[dict]:
    """An export's rows as dicts, flattened the same way for every format: the fields
    curate adds (sample_id, statistics, weight) at the top level."""
    if fmt in ("jsonl", "openrlhf", "openai-rft"):
        return read_jsonl(out)
    if fmt == "trl":
        datasets = pytest.importorskip("datasets")
        return list(datasets.load_from_disk(str(out)))
    frame = pl.read_parquet(out)
    if fmt == "verl":
        return [{**r, **r["extra_info"]} for r in frame.iter_rows(named=True)]
    return list(frame.iter_rows(named=True))


def test_registry_names_and_lookup() -> None:
    assert list(FORMATS) == ["jsonl", "parquet", "verl", "trl", "openrlhf", "openai-rft"]
    assert get_format("OpenAI_RFT").name == "openai-rft"
    with pytest.raises(UsageError, match="choose from jsonl, parquet, verl"):
        get_format("axolotl")
    assert format_for_output(Path("a.ndjson")).name == "jsonl"
    assert format_for_output(Path("a.pq")).name == "parquet"


@pytest.mark.parametrize(
    ("fmt", "name", "fragment"),
    [
        ("verl", "k.jsonl", "--format verl writes Parquet"),
        ("openrlhf", "k.parquet", "--format openrlhf writes JSON Lines"),
        ("trl", "k.jsonl", "--format trl writes a directory"),
        ("jsonl", "k.csv", "--format jsonl writes JSON Lines"),
        ("nope", "k.jsonl", "unknown --format 'nope'"),
    ],
)
def test_format_and_output_name_must_agree(cli, chat_run, outdir, fmt, name, fragment) -> None:
    result = cli("filter", chat_run, "--format", fmt, "-o", outdir / name)
    assert result.exit_code == 2
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(outdir.iterdir()) == []


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_generic_formats_match_the_suffix_default(cli, chat_run, outdir, fmt) -> None:
    suffix = ".jsonl" if fmt == "jsonl" else ".parquet"
    explicit, implicit = outdir / f"a{suffix}", outdir / f"b{suffix}"
    assert cli("filter", chat_run, "--format", fmt, "-o", explicit).exit_code == 0
    assert cli("filter", chat_run, "-o", implicit).exit_code == 0
    assert explicit.read_bytes() == implicit.read_bytes()
    rows = records(fmt, explicit)
    want = expected(chat_run)
    assert [r["id"] for r in rows] == want.kept
    for row in rows:
        assert row["meta"] == {"level": int(row["id"][1:]) % 3}  # original fields kept
        assert_stats(row, want.stats[row["sample_id"]])


def test_jsonl_format_without_suffix(cli, chat_run, outdir) -> None:
    out = outdir / "kept"
    result = cli("filter", chat_run, "--format", "jsonl", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert len(read_jsonl(out)) == len(expected(chat_run).kept)
    assert (outdir / "kept.rejects.jsonl").is_file()


@pytest.mark.parametrize("fmt", list(OUT_NAME))
def test_weights_reach_every_format(cli, chat_run, outdir, tmp_path, fmt) -> None:
    want = expected(chat_run)
    weights = tmp_path / "weights.csv"
    given = {sid: 0.25 + i for i, sid in enumerate(want.kept[:-1])}  # the last one has none
    pl.DataFrame({"sample_id": list(given), "weight": list(given.values())}).write_csv(weights)
    out = outdir / OUT_NAME[fmt]
    args = ("--weights", weights, "--weight-column", "w_obj", "--weight-default", "0.5")
    result = cli("filter", chat_run, "--format", fmt, "-o", out, *args)
    assert result.exit_code == 0, result.stderr
    rows = records(fmt, out)
    assert [r["sample_id"] for r in rows] == want.kept
    for row in rows:
        assert row["w_obj"] == given.get(row["sample_id"], 0.5)
    assert f"1 of {len(want.kept)} kept samples had no weight" in result.stderr


@pytest.mark.parametrize("fmt", list(OUT_NAME))
def test_no_stats_leaves_every_statistic_out(cli, chat_run, outdir, fmt) -> None:
    out = outdir / OUT_NAME[fmt]
    result = cli("filter", chat_run, "--format", fmt, "--no-stats", "-o", out)
    assert result.exit_code == 0, result.stderr
    rows = records(fmt, out)
    assert len(rows) == len(expected(chat_run).kept)
    for row in rows:
        assert not set(STATS) & set(row)
        assert "category" not in row and "mean_score" not in row
    # The rejects keep their statistics and reasons: they explain the filtering.
    rejects = next(p for p in outdir.iterdir() if ".rejects" in p.name)
    frame = pl.read_parquet(rejects) if rejects.suffix == ".parquet" else pl.read_ndjson(rejects)
    assert {"pass_rate", "drop_reason"} <= set(frame.columns)


def test_bad_weights_are_input_errors(cli, chat_run, outdir, tmp_path) -> None:
    weights = tmp_path / "w.jsonl"
    weights.write_text('{"sample_id": "q01", "w": 1}\n')
    result = cli("filter", chat_run, "--weights", weights, "-o", outdir / "k.jsonl")
    assert result.exit_code == 2 and "weights need columns sample_id and weight" in result.stderr
    weights.write_text('{"sample_id": "q01", "weight": 1}\n{"sample_id": "q01", "weight": 2}\n')
    result = cli("filter", chat_run, "--weights", weights, "-o", outdir / "k.jsonl")
    assert result.exit_code == 2 and "more than once" in result.stderr
    weights.write_text('{"sample_id": "q01", "weight": 1}\n')
    result = cli(
        "filter",
        chat_run,
        "--weights",
        weights,
        "--weight-column",
        "question",
        "--weight-default",
        "1",
        "-o",
        outdir / "k.jsonl",
    )
    assert result.exit_code == 2 and "already have a column 'question'" in result.stderr
    assert list(outdir.iterdir()) == []


@pytest.mark.parametrize("fmt", TRAINER)
def test_bare_table_without_data_cannot_make_trainer_formats(cli, tmp_path, outdir, fmt) -> None:
    scores = tmp_path / "scores.csv"
    pl.DataFrame({"sample_id": ["a", "a"], "score": [1.0, 0.0]}).write_csv(scores)
    result = cli("filter", scores, "--format", fmt, "-o", outdir / OUT_NAME[fmt])
    assert result.exit_code == 2
    assert "needs each sample's prompt and answer" in result.stderr
    assert list(outdir.iterdir()) == []


@pytest.fixture
def bare(tmp_path: Path) -> tuple[Path, Path]:
    """A score table and its samples with other common field names (problem/solution)."""
    rng = {"p1": [1, 0, 1, 0], "p2": [1, 1, 0, 0], "p3": [1, 1, 1, 1]}
    scores = tmp_path / "scores.parquet"
    pl.DataFrame(
        [(sid, i, float(s)) for sid, ss in rng.items() for i, s in enumerate(ss)],
        schema={"sample_id": pl.String, "rollout_idx": pl.Int32, "score": pl.Float64},
        orient="row",
    ).write_parquet(scores)
    data = tmp_path / "problems.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": sid, "problem": f"Problem {sid}", "solution": sid.upper()}) + "\n"
            for sid in rng
        )
    )
    return scores, data


@pytest.mark.parametrize("fmt", TRAINER)
def test_bare_table_with_data_resolves_fields_like_eval(cli, bare, outdir, fmt) -> None:
    scores, data = bare
    out = outdir / OUT_NAME[fmt]
    result = cli("filter", scores, "--data", data, "--format", fmt, "-o", out)
    assert result.exit_code == 0, result.stderr
    rows = records(fmt, out)
    assert [r["sample_id"] for r in rows] == ["p1", "p2"]
    for row in rows:
        sid = row["sample_id"]
        prompt = row.get("prompt") or row.get("messages") or row.get("input")
        assert prompt == chat_prompt(f"Problem {sid}", system=None)
        answer = (
            row.get("solution")
            or row.get("reference_answer")
            or row.get("label")
            or row["reward_model"]["ground_truth"]
        )
        assert answer == sid.upper()
    if fmt in ("verl", "openrlhf"):
        sources = {r.get("data_source") or r.get("datasource") for r in rows}
        assert sources == {"problems"}  # the --data file's name


def test_field_overrides_and_system(cli, bare, outdir) -> None:
    scores, data = bare
    out = outdir / "o.jsonl"
    result = cli(
        "filter",
        scores,
        "--data",
        data,
        "--format",
        "openai-rft",
        "-o",
        out,
        "--template",
        "Solve: {problem}",
        "--answer-field",
        "id",
        "--system",
        "Be exact.",
    )
    assert result.exit_code == 0, result.stderr
    items = read_jsonl(out)
    assert items[0]["messages"] == chat_prompt("Solve: Problem p1", system="Be exact.")
    assert items[0]["reference_answer"] == "p1"


def test_run_template_is_reused(cli, tmp_path, outdir) -> None:
    """The run's manifest template (and no system prompt) builds the exported prompt."""
    from curate.evaluation.evaluate import evaluate

    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"a": i, "b": i, "answer": str(2 * i)}) + "\n" for i in range(6))
    )
    answers = {f"Add {i} and {i}.": (str(2 * i), 0.5) for i in range(6)}
    run = tmp_path / "run"
    evaluate(fake_eval_options(data, run, answers, runs=8, template="Add {a} and {b}."))
    out = outdir / "t.jsonl"
    assert cli("filter", run, "--keep", "all", "--format", "openai-rft", "-o", out).exit_code == 0
    items = read_jsonl(out)
    assert [i["messages"] for i in items] == [
        [{"role": "user", "content": f"Add {i} and {i}."}] for i in range(6)
    ]
    assert [i["reference_answer"] for i in items] == [str(2 * i) for i in range(6)]
