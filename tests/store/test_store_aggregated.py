"""load_aggregated (the report's one-pass read) against load_scores + aggregate_rollouts.

Every layout must give the same per-sample aggregates as the row-level path, whichever
fast path it takes (dense blocks, hash group-by, or the load_scores fallback), and every
bad input the same one-line error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from curate.analysis import load_aggregated
from curate.errors import InputError
from curate.stats import aggregate_rollouts, analyze
from curate.stats.dataset import DatasetSummary
from curate.stats.per_sample import (
    MULTIPLICITY,
    aggregate_fixed_width,
    aggregate_run_blocks,
    binary_aggregate,
    binary_counts_aggregate,
    compress_binary_aggregate,
    is_binary,
)
from curate.store.run_dir import RolloutStore
from curate.store.scores import Rows, RunMajor, SampleMajor, load_scores, read_scores


def scores(n: int = 30, k: int = 4, *, partial: bool = False, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 0.5, n)
    draws = rng.random((n, k))
    values = np.round(draws * p[:, None], 2) if partial else (draws < p[:, None]).astype(float)
    return pl.DataFrame(
        {
            "sample_id": [f"s{i}" for i in np.repeat(np.arange(n), k)],
            "rollout_idx": np.tile(np.arange(k, dtype=np.int32), n),
            "score": values.ravel(),
        }
    )


def at(row: int, value: object, column: str) -> pl.Expr:
    """`column`, with `value` in one row."""
    here = pl.int_range(pl.len()) == row
    return pl.when(here).then(value).otherwise(pl.col(column)).alias(column)


BASE = scores()
ERRORS = BASE.with_columns(
    pl.when(pl.int_range(pl.len()).is_in([6, 13])).then(pl.lit("timeout")).alias("error")
)

LAYOUTS = {
    "dense": BASE,
    "dense_partial": scores(partial=True),
    "dense_width_1": BASE.filter(pl.col("rollout_idx") == 0),
    "no_rollout_idx": BASE.drop("rollout_idx"),
    "int_ids_bool_scores": BASE.with_columns(
        pl.col("sample_id").str.slice(1).cast(pl.Int64), pl.col("score").cast(pl.Boolean)
    ),
    "run_major": BASE.sort("rollout_idx", maintain_order=True),
    "run_major_partial": scores(partial=True).sort("rollout_idx", maintain_order=True),
    "run_major_reordered_block": pl.concat(
        [BASE.filter(pl.col("rollout_idx") < 2).sort("rollout_idx", maintain_order=True)]
        + [BASE.filter(pl.col("rollout_idx") == r).reverse() for r in (2, 3)]
    ),
    "run_major_falling_rollout_idx": BASE.sort("rollout_idx", descending=True, maintain_order=True),
    "shuffled": BASE.sample(fraction=1.0, shuffle=True, seed=1),
    "reversed_rollout_idx": BASE.with_columns(pl.col("rollout_idx").reverse().over("sample_id")),
    "ragged": BASE.filter(~((pl.col("sample_id") == "s3") & (pl.col("rollout_idx") > 1))),
    "failed_rollouts": ERRORS,
    "sample_split_over_blocks": pl.concat(
        [BASE.head(8), BASE.head(4).with_columns(pl.col("rollout_idx") + 4)]
    ),
    "exact_duplicate": pl.concat([BASE, BASE.head(2)]),
    "empty_error_strings": BASE.with_columns(pl.lit("").alias("error")),
    # Blocks wider than the prefix that finds the block width.
    "wide_blocks": scores(n=3, k=5000, seed=2),
    "one_sample": scores(n=1, k=6, seed=4),
    "first_sample_again_at_the_end": pl.concat(
        [BASE, BASE.head(4).with_columns(pl.col("rollout_idx") + 4)]
    ),
}


def reference(path: Path) -> pl.DataFrame:
    return aggregate_rollouts(load_scores(path).rollouts).sort("sample_id")


def check_same(path: Path) -> None:
    got = load_aggregated(path)
    # Sums of partial credit may differ in the last bit with the summation order.
    assert_frame_equal(
        got.aggregate.sort("sample_id"), reference(path), check_exact=False, rel_tol=1e-12
    )
    want = load_scores(path).rollouts.select("sample_id", "rollout_idx", "score", "error")
    rows = got.rollouts.select("sample_id", "rollout_idx", "score", "error").collect()
    assert_frame_equal(rows.sort("sample_id", "rollout_idx"), want.sort("sample_id", "rollout_idx"))
    old, new = analyze(want), analyze(got.rollouts, aggregate=got.aggregate)
    assert new.summary.categories == old.summary.categories
    assert new.summary.mean_score == pytest.approx(old.summary.mean_score, rel=1e-12)
    # The report's compressed read: 0/1 scores collapse to a few weighted rows, with
    # the same data-set summary.
    small = load_aggregated(path, compress=True)
    assert (MULTIPLICITY in small.aggregate.columns) is is_binary(got.aggregate)
    if MULTIPLICITY in small.aggregate.columns:
        assert small.aggregate.height <= small.aggregate["n_rollouts"].max() * 2 + 2
    same_summary(analyze(small.rollouts, aggregate=small.aggregate).summary, old.summary)


def same_summary(got: DatasetSummary, want: DatasetSummary) -> None:
    """Equal up to the last bits of float sums (their order differs)."""
    assert_close(got.to_dict(), want.to_dict(), "summary")


def assert_close(a: object, b: object, where: str) -> None:
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), where
        for key in b:
            assert_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15), where
    else:
        assert a == b, where


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_same_aggregates_as_load_scores(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "scores.parquet"
    LAYOUTS[layout].write_parquet(path)
    check_same(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_text_tables_take_the_exact_path(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"scores{suffix}"
    if suffix == ".csv":
        ERRORS.write_csv(path)
    else:
        ERRORS.write_ndjson(path)
    check_same(path)


def test_run_directories(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest({"model": "m", "adaptive": True})
    store.append(ERRORS.filter(pl.col("rollout_idx") < 2))
    store.append(ERRORS.filter(pl.col("rollout_idx") >= 2))
    check_same(store.run_dir)
    # A retry of the failed rollouts in a later shard: the latest scored row wins.
    retry = ERRORS.filter(pl.col("error").is_not_null()).with_columns(
        pl.lit(None, pl.String).alias("error"), pl.lit(1.0).alias("score")
    )
    store.append(retry)
    check_same(store.run_dir)
    assert load_aggregated(store.run_dir).manifest["adaptive"] is True


BAD = {
    "nan": BASE.with_columns(at(5, float("nan"), "score")),
    "nan_in_failed_row": BASE.with_columns(
        at(5, float("nan"), "score"),
        pl.when(pl.int_range(pl.len()) == 5).then(pl.lit("x")).alias("error"),
    ),
    "above_one": BASE.with_columns(at(5, 2.0, "score")),
    "negative": BASE.with_columns(at(5, -0.5, "score")),
    "infinite": BASE.with_columns(at(5, float("inf"), "score")),
    "no_score_no_error": BASE.with_columns(at(5, None, "score")),
    "missing_sample_id": BASE.with_columns(at(5, None, "sample_id")),
    "missing_rollout_idx": BASE.with_columns(at(5, None, "rollout_idx")),
    "conflicting_duplicate": pl.concat(
        [BASE, BASE.head(1).with_columns((1.0 - pl.col("score")).alias("score"))]
    ),
    "conflict_inside_a_block": BASE.with_columns(
        at(1, 0, "rollout_idx"), at(1, 1.0 - pl.col("score").first(), "score")
    ),
    "text_score": BASE.with_columns(pl.col("score").cast(pl.String)).with_columns(
        at(3, pl.lit("abc"), "score")
    ),
    "run_major_repeated_run": BASE.filter(pl.col("rollout_idx") < 2)
    .sort("rollout_idx", maintain_order=True)
    .with_columns(pl.lit(0, pl.Int32).alias("rollout_idx")),
    "empty": BASE.head(0),
    "no_score_column": BASE.drop("score"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_gives_the_same_error(tmp_path: Path, case: str) -> None:
    path = tmp_path / "scores.parquet"
    BAD[case].write_parquet(path)
    with pytest.raises(InputError) as want:
        load_scores(path)
    with pytest.raises(InputError) as got:
        load_aggregated(path)
    assert str(got.value) == str(want.value)


def test_missing_and_unreadable_inputs(tmp_path: Path) -> None:
    (tmp_path / "corrupt.parquet").write_text("not parquet")
    (tmp_path / "x.txt").write_text("hi")
    paths = [tmp_path / "nope.parquet", tmp_path / "corrupt.parquet", tmp_path / "x.txt", tmp_path]
    for path in paths:
        with pytest.raises(InputError) as want:
            load_scores(path)
        with pytest.raises(InputError) as got:
            load_aggregated(path)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize(
    ("layout", "dense"),
    [("dense", True), ("run_major", True), ("shuffled", False), ("ragged", False)],
)
def test_dense_layouts_are_recognised(tmp_path: Path, layout: str, dense: bool) -> None:
    """N rollouts per prompt, stored sample by sample or run by run, skip the hash
    group-by; other layouts do not."""
    path = tmp_path / "scores.parquet"
    LAYOUTS[layout].write_parquet(path)
    layout = read_scores(path).layout
    assert not isinstance(layout, Rows)
    assert isinstance(layout, (SampleMajor, RunMajor)) is dense


def test_dense_aggregations_match_group_by() -> None:
    frame = scores(n=40, k=5, partial=True, seed=3).with_columns(
        pl.lit(None, pl.String).alias("error")
    )
    want = aggregate_rollouts(frame).sort("sample_id")
    ids = frame["sample_id"].gather_every(5)
    by_sample = aggregate_fixed_width(ids, frame["score"], 5)
    by_run = aggregate_run_blocks(ids, [frame["score"].gather_every(5, r) for r in range(5)])
    for got in (by_sample, by_run):
        assert got.schema == want.schema
        assert_frame_equal(got.sort("sample_id"), want, check_exact=False, rel_tol=1e-12)


def test_binary_counts_aggregate_is_the_compressed_aggregate() -> None:
    frame = scores(n=200, k=6, seed=5).with_columns(pl.lit(None, pl.String).alias("error"))
    ids = frame["sample_id"].gather_every(6)
    full = aggregate_fixed_width(ids, frame["score"], 6)
    successes = frame["score"].reshape((-1, 6)).arr.sum()
    direct = binary_counts_aggregate(successes, 6)
    assert_frame_equal(direct, compress_binary_aggregate(full))
    assert direct[MULTIPLICITY].sum() == 200


def test_partial_credit_is_not_compressed() -> None:
    agg = aggregate_rollouts(
        scores(partial=True).with_columns(pl.lit(None, pl.String).alias("error"))
    )
    with pytest.raises(ValueError, match="0/1"):
        compress_binary_aggregate(agg)


@pytest.mark.parametrize("row_group_size", [1, 3, 5, 7])
def test_row_groups_that_split_blocks(tmp_path: Path, row_group_size: int) -> None:
    """The dense check works chunk by chunk: blocks split over row groups (of any
    size, down to one row) must read exactly as one chunk does."""
    path = tmp_path / "scores.parquet"
    BASE.write_parquet(path, row_group_size=row_group_size)
    assert isinstance(read_scores(path).layout, (SampleMajor, RunMajor))
    check_same(path)
    # A second, different score for the last sample's run 2, in its own block's place.
    flipped = BASE.tail(2).head(1).with_columns((1.0 - pl.col("score")).alias("score"))
    bad = pl.concat([BASE, flipped])
    bad.write_parquet(path, row_group_size=row_group_size)
    with pytest.raises(InputError) as want:
        load_scores(path)
    with pytest.raises(InputError) as got:
        load_aggregated(path, compress=True)
    assert str(got.value) == str(want.value)


def test_binary_aggregate_from_the_three_counts() -> None:
    """With 0/1 scores the aggregate follows from (n_rollouts, n_errors, successes),
    also for a sample whose every rollout failed."""
    frame = ERRORS.with_columns(
        pl.when(pl.col("sample_id") == "s7").then(pl.lit("boom")).otherwise("error").alias("error")
    ).with_columns(pl.when(pl.col("error").is_null()).then(pl.col("score")).alias("score"))
    want = aggregate_rollouts(frame).sort("sample_id")
    assert want.filter(pl.col("sample_id") == "s7")["n_rollouts"].item() == 0
    got = binary_aggregate(want.select("sample_id", "n_rollouts", "n_errors", "successes"))
    assert_frame_equal(got, want)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize(
    "layout", ["dense", "dense_partial", "run_major", "shuffled", "failed_rollouts", "ragged"]
)
def test_valid_parquet_takes_the_one_pass_read(tmp_path: Path, layout: str, compress: bool) -> None:
    """The one-pass read falls back to load_scores on anything unexpected, which gives
    the same numbers: only this check notices when the fast path itself breaks."""
    path = tmp_path / "scores.parquet"
    LAYOUTS[layout].write_parquet(path)
    assert not isinstance(load_aggregated(path, compress=compress).layout, Rows)
