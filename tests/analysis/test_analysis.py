"""curate.analysis and the library calls of the analysis commands, without the CLI:
one read, the same numbers as the row-level path, and the layering rules."""

from __future__ import annotations

import ast
from pathlib import Path

import polars as pl
import pytest

import curate
from curate.allocation import plan_rollouts
from curate.analysis import load_aggregated, load_analysis
from curate.errors import InputError, UsageError
from curate.filtering import FilterRequest, filter_run, rejects_path
from curate.plots import default_plot_path, plot_run
from curate.report.build import build_report
from curate.stats import analyze
from curate.store.run_dir import RolloutStore
from curate.store.scores import AnyOrder, Rows, RunMajor, SampleMajor, load_scores, read_scores
from tests.conftest import long_frame

SCORES = {
    "a": [1, 0, 1, 0],
    "b": [1, 1, 1, 1],
    "c": [0, 0, 0, 0],
    "d": [1, 0, 0, 0],
    "e": [0, 1, 1, 1],
}
HIGH_VARIANCE = ["a", "d", "e"]


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "scores.parquet"
    long_frame(SCORES).with_columns(
        pl.lit(10).alias("prompt_tokens"), pl.lit(5).alias("completion_tokens")
    ).write_parquet(path)
    return path


def write(tmp_path: Path, frame: pl.DataFrame, name: str = "scores.parquet") -> Path:
    path = tmp_path / name
    frame.write_parquet(path)
    return path


# ---------------------------------------------------------------- the store's layouts


def test_each_layout_is_described(tmp_path: Path) -> None:
    frame = long_frame(SCORES)
    layouts = {
        "sample_major": (frame, SampleMajor),
        "run_major": (frame.sort("rollout_idx", maintain_order=True), RunMajor),
        "any_order": (frame.sample(fraction=1.0, shuffle=True, seed=3), AnyOrder),
    }
    for name, (rows, kind) in layouts.items():
        read = read_scores(write(tmp_path, rows, f"{name}.parquet"))
        assert isinstance(read.layout, kind), name
    csv = tmp_path / "scores.csv"
    frame.write_csv(csv)
    assert isinstance(read_scores(csv).layout, Rows)  # only Parquet takes the one scan
    assert isinstance(read_scores(tmp_path / "sample_major.parquet", fast=False).layout, Rows)


def test_sample_major_layout_holds_the_matrix(tmp_path: Path) -> None:
    layout = read_scores(write(tmp_path, long_frame(SCORES))).layout
    assert isinstance(layout, SampleMajor)
    assert layout.ids.to_list() == list(SCORES)
    assert layout.width == 4 and layout.binary
    assert layout.scores.to_list() == [float(s) for v in SCORES.values() for s in v]


def test_any_order_checks_ride_along(tmp_path: Path) -> None:
    """A repeated (sample_id, rollout_idx) pair is caught inside the group-by."""
    frame = long_frame(SCORES)
    shuffled = pl.concat([frame, frame.head(1)]).sample(fraction=1.0, shuffle=True, seed=1)
    layout = read_scores(write(tmp_path, shuffled)).layout
    assert isinstance(layout, AnyOrder)
    assert layout.group([pl.col("score").sum().alias("total")]) is None
    # The exact read resolves the exact repeat, as load_scores does.
    agg = load_aggregated(tmp_path / "scores.parquet")
    assert isinstance(agg.layout, Rows)
    assert agg.aggregate["n_rollouts"].sum() == frame.height


def test_token_columns_come_from_the_same_scan(table: Path) -> None:
    read = read_scores(table)
    assert not isinstance(read.layout, Rows)
    tokens = read.tokens()
    assert tokens is not None and tokens.columns == ["prompt_tokens", "completion_tokens"]
    assert tokens["prompt_tokens"].sum() == 10 * 20


# ---------------------------------------------------------------- load_analysis


@pytest.mark.parametrize("per_sample", [True, False])
def test_load_analysis_matches_analyze(table: Path, per_sample: bool) -> None:
    want = analyze(load_scores(table).rollouts)
    got = load_analysis(table, per_sample=per_sample)
    assert got.summary.to_dict() == want.summary.to_dict()
    assert got.prior == want.prior and got.binary
    if per_sample:
        cols = ["sample_id", "category", "pass_rate", "variance"]
        assert (
            got.per_sample.sort("sample_id")
            .select(cols)
            .equals(want.per_sample.sort("sample_id").select(cols))
        )
    else:  # compressed: a row per distinct (n, c), weighted
        assert "sample_id" not in got.per_sample.columns
        assert got.per_sample["multiplicity"].sum() == len(SCORES)
    assert got.usage() == {"prompt_tokens": 200, "completion_tokens": 100, "cost_usd": None}
    assert got.usage(1.0, 2.0)["cost_usd"] == pytest.approx((200 + 200) / 1e6)


def test_load_analysis_of_a_run_directory(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest({"model": "m", "adaptive": True})
    store.write_samples(pl.DataFrame({"sample_id": list(SCORES), "question": list("vwxyz")}))
    store.append(long_frame(SCORES))
    loaded = load_analysis(store.run_dir, per_sample=False)
    assert loaded.is_run_dir and loaded.manifest is not None and loaded.manifest["adaptive"]
    samples = loaded.samples()
    assert samples is not None and samples["question"].to_list() == list("vwxyz")
    assert loaded.usage() is None  # no token counts, no prices: no usage section


def test_bad_input_names_the_problem(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_analysis(tmp_path / "missing.parquet")
    bad = write(tmp_path, long_frame(SCORES).with_columns(pl.lit(2.0).alias("score")))
    with pytest.raises(InputError, match=r"outside \[0, 1\]"):
        load_analysis(bad, per_sample=False)


# ---------------------------------------------------------------- the library calls


def test_build_report(table: Path) -> None:
    report = build_report(table, fail_under_signal=0.9, price_in=1.0)
    assert report.summary.categories["high_variance"] == len(HIGH_VARIANCE)
    assert [g.name for g in report.failed_checks] == ["fail-under-signal"]
    assert report.usage is not None and report.usage["prompt_tokens"] == 200


def test_filter_run(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.jsonl"
    result = filter_run(FilterRequest(table, out, pass_rate="0.3:1"))
    assert result.paths == [out] and result.rejects == rejects_path(out)
    assert sorted(pl.read_ndjson(out)["sample_id"]) == ["a", "e"]  # d: 1 of 4 passed
    assert (result.kept, result.total, result.dropped, result.unmatched) == (2, 5, 3, 0)
    assert dict(result.drop_reasons) == {
        "always_correct": 1,
        "always_incorrect": 1,
        "pass_rate 0.25 outside [0.3, 1.0]": 1,
    }
    assert sorted(pl.read_ndjson(result.rejects)["sample_id"]) == ["b", "c", "d"]


def test_filter_run_checks_options_before_reading(tmp_path: Path) -> None:
    missing = tmp_path / "missing.parquet"
    with pytest.raises(UsageError, match="unknown --keep value"):
        filter_run(FilterRequest(missing, tmp_path / "out.jsonl", keep=["nope"]))
    with pytest.raises(UsageError, match="--split"):
        filter_run(FilterRequest(missing, tmp_path / "out.jsonl", split="train"))


def test_plan_rollouts(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan.csv"
    plan = plan_rollouts(table, 30, output=out, zero_signal="drop")
    assert plan.frame["planned_rollouts"].sum() == 30
    assert sorted(plan.frame["sample_id"]) == HIGH_VARIANCE
    assert plan.left_out == 2 and plan.at_minimum == 0
    assert pl.read_csv(out)["planned_rollouts"].sum() == 30
    assert 0 < plan.variance_ratio() <= 1.0 + 1e-12
    with pytest.raises(InputError, match="unknown table format"):
        plan_rollouts(tmp_path / "missing.parquet", 30, output=tmp_path / "plan.txt")


def test_plot_run(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "gate.svg"
    assert plot_run(table, kind="gate", output=out) == out
    assert out.read_bytes().startswith(b"<?xml")
    assert default_plot_path(table, "histogram") == table.with_name("scores.histogram.png")
    with pytest.raises(UsageError, match="unknown plot kind"):
        plot_run(table, kind="pie")


# ---------------------------------------------------------------- layering


def imported_modules(package: str) -> set[str]:
    """Every curate module a package imports, at module level or inside a function."""
    found: set[str] = set()
    for path in (Path(curate.__file__).parent / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("curate.")}


def test_store_and_stats_do_not_import_each_other() -> None:
    store = imported_modules("store")
    stats = imported_modules("stats")
    assert not [m for m in store if m.startswith(("curate.stats", "curate.analysis"))], store
    assert not [m for m in stats if m.startswith(("curate.store", "curate.analysis"))], stats


@pytest.mark.parametrize("scores", ["binary", "partial"])
def test_errors_and_groups_agree_between_the_one_scan_and_the_row_read(
    tmp_path: Path, scores: str
) -> None:
    """The report's read (one scan, 0/1 scores compressed with the group as a key) and
    the per-sample read give the same top errors and the same by-group rows."""
    samples = {
        "a": [1, 0, None, 0],
        "b": [1, 1, 1, 1],
        "c": [None, None, 0, 0],
        "d": [1, 0, 0, 0.5 if scores == "partial" else 0],
        "e": [0, 1, 1, None],
    }
    frame = long_frame(samples).with_columns(
        pl.when(pl.col("error").is_not_null())
        .then(
            pl.when(pl.col("sample_id") == "c").then(pl.lit("refused")).otherwise(pl.lit("timeout"))
        )
        .alias("error"),
        pl.when(pl.col("sample_id") < "c").then(pl.lit("x")).otherwise(pl.lit("y")).alias("src"),
    )
    path = tmp_path / "scores.parquet"
    frame.write_parquet(path)
    fast = load_analysis(path, per_sample=False, group_by="src").summary
    rows = load_analysis(path, per_sample=True, group_by="src").summary
    assert (
        fast.top_errors
        == rows.top_errors
        == [
            {"error": "refused", "count": 2},
            {"error": "timeout", "count": 2},
        ]
    )
    assert fast.group_by == rows.group_by == "src"
    assert [r["group"] for r in fast.by_group] == ["y", "x"]
    for got, want in zip(fast.by_group, rows.by_group, strict=True):
        assert got == pytest.approx(want, abs=1e-12)
    assert load_analysis(path, per_sample=False).summary.by_group == []
    with pytest.raises(InputError, match="no column 'level' to group by"):
        load_analysis(path, per_sample=False, group_by="level")
