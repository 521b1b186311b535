"""load_scores: every input format, run directories, errors, and every bad-input path."""

from __future__ import annotations

import importlib
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from curate.errors import InputError
from curate.stats import analyze
from curate.store.run_dir import RolloutStore
from curate.store.scores import SCORE_COLUMNS, load_scores

SCORES = {
    "sample_id": ["a", "a", "a", "b", "b", "b"],
    "rollout_idx": [0, 1, 2, 0, 1, 2],
    "score": [1.0, 0.0, 1.0, 0.0, 0.0, 0.5],
}


def triples(frame: pl.DataFrame) -> list[tuple]:
    return frame.sort("sample_id", "rollout_idx").select("sample_id", "rollout_idx", "score").rows()


@pytest.mark.parametrize("name", ["s.parquet", "s.pq", "s.csv", "s.jsonl", "s.ndjson", "s.json"])
def test_every_table_format_loads_the_same(table_file, name: str) -> None:
    source = load_scores(table_file(name, SCORES))
    assert not source.is_run_dir and source.manifest is None and source.samples() is None
    frame = source.rollouts
    assert frame.columns[:4] == list(SCORE_COLUMNS)
    assert frame.schema["sample_id"] == pl.String
    assert frame.schema["rollout_idx"] == pl.Int32
    assert frame.schema["score"] == pl.Float64
    assert triples(frame) == [
        ("a", 0, 1.0),
        ("a", 1, 0.0),
        ("a", 2, 1.0),
        ("b", 0, 0.0),
        ("b", 1, 0.0),
        ("b", 2, 0.5),
    ]
    assert frame["error"].null_count() == 6


def test_json_lines_with_json_suffix(text_file) -> None:
    path = text_file("s.json", '{"sample_id": "a", "score": 1}\n{"sample_id": "a", "score": 0}\n')
    assert triples(load_scores(path).rollouts) == [("a", 0, 1.0), ("a", 1, 0.0)]


def test_missing_rollout_idx_is_numbered_in_file_order(text_file) -> None:
    path = text_file("s.csv", "sample_id,score\nb,1\na,0\nb,0\na,1\nb,1\n")
    assert triples(load_scores(path).rollouts) == [
        ("a", 0, 0.0),
        ("a", 1, 1.0),
        ("b", 0, 1.0),
        ("b", 1, 0.0),
        ("b", 2, 1.0),
    ]


def test_integer_and_boolean_scores_and_ids(table_file) -> None:
    frame = load_scores(
        table_file("s.parquet", {"sample_id": [1, 1, 2], "score": [True, False, True]})
    ).rollouts
    assert triples(frame) == [("1", 0, 1.0), ("1", 1, 0.0), ("2", 0, 1.0)]


def test_numeric_strings_are_parsed(text_file) -> None:
    path = text_file(
        "s.jsonl", '{"sample_id": "a", "score": " 1.0 "}\n{"sample_id": "a", "score": "0"}\n'
    )
    assert triples(load_scores(path).rollouts) == [("a", 0, 1.0), ("a", 1, 0.0)]


def test_error_rows_are_errors_never_scores(text_file) -> None:
    path = text_file(
        "s.csv",
        "sample_id,rollout_idx,score,error\n"
        "a,0,1,\n"
        "a,1,0,timeout\n"  # a score on an error row is ignored
        "a,2,,rate limited\n"
        "b,0,0,\n",
    )
    frame = load_scores(path).rollouts.sort("sample_id", "rollout_idx")
    assert frame.select("score", "error").rows() == [
        (1.0, None),
        (None, "timeout"),
        (None, "rate limited"),
        (0.0, None),
    ]
    summary = analyze(frame).summary
    assert summary.errors == 2 and summary.rollouts == 4
    assert summary.mean_score == pytest.approx((1.0 + 0.0) / 2)  # a: [1], b: [0]


def test_run_directory(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest({"model": "m"})
    store.write_samples(pl.DataFrame({"sample_id": ["a", "b"], "question": ["q1", "q2"]}))
    rows = pl.DataFrame(
        {
            "sample_id": ["a", "a", "b", "b"],
            "rollout_idx": [0, 1, 0, 1],
            "score": [1.0, None, 0.0, 1.0],
            "error": [None, "timeout", None, None],
            "completion_tokens": [5, None, 7, 9],
        },
        schema_overrides={"rollout_idx": pl.Int32, "completion_tokens": pl.Int32},
    )
    store.append(rows)
    store.append(
        rows.filter(pl.col("error").is_not_null()).with_columns(
            pl.lit(0.0).alias("score"), pl.lit(None, dtype=pl.String).alias("error")
        )
    )  # a resumed run retried the failure
    source = load_scores(store.run_dir)
    assert source.is_run_dir
    assert source.manifest is not None and source.manifest["model"] == "m"
    assert source.samples()["question"].to_list() == ["q1", "q2"]
    assert triples(source.rollouts) == [("a", 0, 1.0), ("a", 1, 0.0), ("b", 0, 0.0), ("b", 1, 1.0)]
    assert source.rollouts["error"].null_count() == 4
    assert "completion_tokens" in source.rollouts.columns


def test_run_directory_without_manifest(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.append(pl.DataFrame({"sample_id": ["a"], "rollout_idx": [0], "score": [1.0]}))
    source = load_scores(store.run_dir)
    assert source.manifest is None and source.is_run_dir
    assert triples(source.rollouts) == [("a", 0, 1.0)]


def test_exact_duplicates_are_dropped(text_file) -> None:
    path = text_file("s.csv", "sample_id,rollout_idx,score\na,0,1\na,1,0\na,0,1\nb,0,1\n")
    assert triples(load_scores(path).rollouts) == [("a", 0, 1.0), ("a", 1, 0.0), ("b", 0, 1.0)]


# ---------------------------------------------------------------- bad input


def assert_input_error(path: Path, *fragments: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_scores(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    assert info.value.exit_code == 2
    return info.value


def test_missing_file(tmp_path: Path) -> None:
    assert_input_error(tmp_path / "nope.csv", "no such file")


def test_directory_that_is_not_a_run_dir(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert_input_error(tmp_path / "d", "not a run directory")


def test_run_dir_without_rollouts(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest({})
    assert_input_error(store.run_dir, "no rollouts")


def test_run_dir_with_bad_manifest(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{oops")
    with pytest.raises(InputError, match="manifest is not valid JSON"):
        load_scores(run)


@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("s.csv", "id,score\na,1\n", ("missing required column(s) sample_id", "have: id, score")),
        ("s.csv", "sample_id,value\na,1\n", ("missing required column(s) score",)),
        ("s.csv", "x\n1\n", ("sample_id, score",)),
        ("s.csv", "sample_id,score\na,1\nb,abc\n", ("score is not numeric", "'b'", "abc")),
        ("s.jsonl", '{"sample_id":"a","score":"yes"}\n', ("score is not numeric",)),
        ("s.csv", "sample_id,score\na,1\na,nan\n", ("score is NaN", "'a'")),
        ("s.csv", "sample_id,score\na,1\nb,NaN\n", ("score is NaN", "'b'")),
        ("s.csv", "sample_id,score\na,1\na,1.5\n", ("score 1.5 is outside [0, 1]", "'a'")),
        ("s.csv", "sample_id,score\na,-0.1\n", ("outside [0, 1]",)),
        ("s.csv", "sample_id,score\na,inf\n", ("outside [0, 1]",)),
        ("s.csv", "sample_id,score\n", ("table is empty",)),
        ("s.jsonl", "", ("table",)),
        ("s.csv", "", ("cannot read table",)),
        ("s.csv", "sample_id,score\na,1\na,\n", ("neither a score nor an error",)),
        ("s.csv", "sample_id,score\n,1\n", ("sample_id has missing values",)),
        ("s.csv", "sample_id,rollout_idx,score\na,0,1\na,0,0\n", ("conflicting rows", "'a' run 0")),
        (
            "s.csv",
            "sample_id,rollout_idx,score,error\na,0,1,\na,0,,timeout\n",
            ("conflicting rows",),
        ),
        ("s.csv", "sample_id,rollout_idx,score\na,x,1\n", ("rollout_idx is not an integer",)),
        ("s.csv", "sample_id,rollout_idx,score\na,,1\n", ("rollout_idx has missing values",)),
        ("s.txt", "sample_id,score\na,1\n", ("unknown table format '.txt'",)),
        ("scores", "sample_id,score\na,1\n", ("unknown table format '(none)'",)),
        ("s.json", "[{oops", ("cannot read",)),
        ("s.parquet", "not parquet at all", ("cannot read table",)),
    ],
)
def test_bad_tables(text_file, name: str, text: str, fragments: tuple[str, ...]) -> None:
    assert_input_error(text_file(name, text), *fragments)


def test_nan_in_parquet(table_file) -> None:
    path = table_file("s.parquet", {"sample_id": ["a", "b"], "score": [1.0, float("nan")]})
    assert_input_error(path, "score is NaN", "'b'")


def test_empty_parquet(table_file) -> None:
    frame = pl.DataFrame(schema={"sample_id": pl.String, "score": pl.Float64})
    assert_input_error(table_file("s.parquet", frame), "table is empty")


def test_conflict_count_is_reported(text_file) -> None:
    path = text_file(
        "s.csv", "sample_id,rollout_idx,score\nb,0,1\nb,0,0\na,1,1\na,1,0.5\nc,0,1\nc,0,1\n"
    )
    err = assert_input_error(path, "conflicting rows for sample 'a' run 1", "2 conflicting pair(s)")
    assert err.path == path


# ---------------------------------------------------------------- the report's one-pass loader

_scores_module = importlib.import_module("curate.analysis")


@pytest.mark.skipif(
    not hasattr(_scores_module, "load_aggregated"), reason="no one-pass loader in curate.store"
)
@pytest.mark.parametrize(
    "name", ["s.parquet", "s.csv", "s.jsonl", "dups.parquet", "errors.parquet", "run"]
)
def test_load_aggregated_matches_load_scores(table_file, tmp_path: Path, name: str) -> None:
    from curate.stats import aggregate_rollouts

    data = pl.DataFrame(SCORES).with_columns(pl.lit(None, dtype=pl.String).alias("error"))
    if name == "dups.parquet":  # exact repeats are dropped
        data = pl.concat([data, data.head(2)])
    if name == "errors.parquet":  # error rows keep no score
        data = data.with_columns(
            pl.when(pl.col("score") == 0.5).then(pl.lit("boom")).alias("error")
        )
    if name == "run":
        store = RolloutStore(tmp_path / "run")
        store.create()
        store.write_manifest({"model": "m"})
        frame = data.with_columns(pl.col("rollout_idx").cast(pl.Int32))
        store.append(frame.head(3))
        store.append(frame.with_columns(pl.lit(1.0).alias("score")).head(1))  # later shard wins
        store.append(frame.tail(3))
        path = store.run_dir
    else:
        path = table_file(name, data)
    fast = _scores_module.load_aggregated(path)
    slow = aggregate_rollouts(load_scores(path).rollouts)
    assert_frame_equal(
        fast.aggregate.sort("sample_id"),
        slow.sort("sample_id"),
        check_column_order=False,
        check_dtypes=False,
        check_exact=False,
    )
