"""Weights as repetitions (`--as-frequency`) and difficulty columns and pools."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from curate.errors import UsageError
from curate.filtering.curriculum import (
    difficulty_expr,
    expand_by_frequency,
    parse_cuts,
    pool_path,
)
from tests.conftest import invoke_curate


def test_copies_follow_the_weights_and_sum_to_the_total() -> None:
    kept = pl.DataFrame({"sample_id": ["a", "b", "c", "d"], "x": [1, 2, 3, 4]})
    weights = pl.DataFrame({"sample_id": ["d", "c", "b", "a"], "weight": [0.0, 1.0, 2.0, 5.0]})
    out, freq = expand_by_frequency(kept, weights, total=16)
    counts = dict(out.group_by("sample_id").len().iter_rows())
    assert counts == {"a": 10, "b": 4, "c": 2}  # 16 split 5:2:1, d (weight 0) left out
    assert (freq.rows, freq.samples, freq.left_out, freq.max_copies) == (16, 3, 1, 10)
    assert out["copies"].to_list()[:1] == [10]
    # Rows stay in the input's order, copies together.
    assert out["sample_id"].to_list() == ["a"] * 10 + ["b"] * 4 + ["c"] * 2


def test_default_total_is_one_row_per_kept_sample() -> None:
    kept = pl.DataFrame({"sample_id": ["a", "b"]})
    out, freq = expand_by_frequency(
        kept, pl.DataFrame({"sample_id": ["a", "b"], "weight": [3.0, 1.0]}), None
    )
    assert freq.rows == 2 and out.height == 2


@pytest.mark.parametrize("weights", [[0.0, 0.0], [1.0, -1.0], [float("nan"), 1.0]])
def test_unusable_weights_are_refused(weights: list[float]) -> None:
    kept = pl.DataFrame({"sample_id": ["a", "b"]})
    with pytest.raises(UsageError):
        expand_by_frequency(kept, pl.DataFrame({"sample_id": ["a", "b"], "weight": weights}), 4)


def test_difficulty_levels_and_cuts() -> None:
    frame = pl.DataFrame({"pass_rate": [0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.9, None]})
    levels = frame.select(difficulty_expr("pass_rate", parse_cuts(None)))["difficulty"].to_list()
    assert levels == ["hard", "hard", "medium", "medium", "medium", "easy", None]
    assert parse_cuts("0.2:0.8") == (0.2, 0.8)
    for bad in ("0.8:0.2", "x", "0.5", "-0.1:0.5"):
        with pytest.raises(UsageError):
            parse_cuts(bad)
    assert pool_path("out/train.parquet", "easy") == "out/train.easy.parquet"
    assert pool_path("out/train", "hard") == "out/train.hard"


# -- through `curate filter` -------------------------------------------------------------


@pytest.fixture
def run_scores(tmp_path: Path) -> Path:
    """6 samples x 4 rollouts, pass rates 0, 0.25, 0.5, 0.5, 0.75, 1."""
    rights = [0, 1, 2, 2, 3, 4]
    rows = [
        {"sample_id": f"s{i}", "rollout_idx": r, "score": float(r < k)}
        for i, k in enumerate(rights)
        for r in range(4)
    ]
    path = tmp_path / "scores.csv"
    pl.DataFrame(rows).write_csv(path)
    return path


def test_filter_as_frequency_with_a_weight_table(run_scores: Path, tmp_path: Path) -> None:
    table = tmp_path / "w.csv"
    pl.DataFrame(
        {"sample_id": [f"s{i}" for i in range(6)], "weight": [1, 1, 2, 2, 1, 1]}
    ).write_csv(table)
    out = tmp_path / "freq.jsonl"
    result = invoke_curate(
        "filter",
        run_scores,
        "-o",
        out,
        "--keep",
        "all",
        "--weights",
        table,
        "--as-frequency",
        "--total",
        "16",
    )
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    counts = {
        sid: sum(r["sample_id"] == sid for r in rows) for sid in {r["sample_id"] for r in rows}
    }
    assert counts == {"s0": 2, "s1": 2, "s2": 4, "s3": 4, "s4": 2, "s5": 2}
    assert all("weight" not in r for r in rows)  # the repetitions carry the weights
    assert "as frequency: 16 rows for 6 samples" in result.stdout


def test_filter_difficulty_pools(run_scores: Path, tmp_path: Path) -> None:
    out = tmp_path / "cur.jsonl"
    result = invoke_curate(
        "filter", run_scores, "-o", out, "--keep", "all", "--difficulty", "pools"
    )
    assert result.exit_code == 0, result.stderr
    level = {
        name: [
            json.loads(x)["sample_id"]
            for x in (tmp_path / f"cur.{name}.jsonl").read_text().splitlines()
        ]
        for name in ("easy", "medium", "hard")
    }
    assert level == {"easy": ["s4", "s5"], "medium": ["s2", "s3"], "hard": ["s0", "s1"]}
    assert not out.exists()
    assert "pools: easy 2, medium 2, hard 2" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--as-frequency"], "give --weights too"),
        (["--total", "5"], "add --as-frequency"),
        (["--difficulty", "levels"], "expected column or pools"),
        (["--difficulty-cuts", "0.1:0.9"], "needs --difficulty"),
        (["--difficulty", "column", "--difficulty-cuts", "0.9:0.1"], "LO < HI"),
        (["--weights", "linear", "--as-frequency", "--total", "0"], "at least 1"),
    ],
)
def test_bad_curriculum_options(
    run_scores: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "o.jsonl"
    result = invoke_curate("filter", run_scores, "-o", out, *args)
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()
