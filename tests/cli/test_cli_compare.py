"""`curate compare` and `curate filter --against`: formats, the JSON contract, the
forgotten gate, plots, per-sample tables, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import long_frame

# The JSON contract of `curate compare --format json` (docs/reference/json.md): keys
# are only added.
COMPARE_KEYS = frozenset(
    {
        "runs",
        "forecast",
        "samples_compared",
        "samples_left_out",
        "group_size",
        "alpha",
        "threshold",
        "before",
        "after",
        "test",
        "significant",
        "transitions",
        "sets",
        "steps",
        "warnings",
        "gates",
        "passed",
    }
)
RUN_KEYS = frozenset(
    {
        "label",
        "path",
        "samples",
        "left_out",
        "mean_score",
        "best_of_n",
        "high_variance_fraction",
        "expected_open_fraction",
        "categories",
        "pass_at_k",
        "binary_scores",
    }
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three checkpoints of 400 samples x 8 rollouts: base, sft (pass rates up 0.15),
    rl (samples 0-99 collapse to 0, the rest up 0.3), plus a run of other samples."""
    d = tmp_path_factory.mktemp("compare")
    rng = np.random.default_rng(5)
    p = rng.beta(0.6, 0.6, 400)
    rl = np.clip(p + 0.3, 0, 1)
    rl[:100] = 0.0
    out = {}
    for name, rates in [("base", p), ("sft", np.clip(p + 0.15, 0, 1)), ("rl", rl)]:
        scores = (rng.random((400, 8)) < rates[:, None]).astype(float)
        path = d / f"{name}.parquet"
        long_frame({f"q{i}": list(row) for i, row in enumerate(scores)}).write_parquet(path)
        out[name] = path
    other = d / "other.parquet"
    long_frame({"zz": [1, 0, 1]}).write_parquet(other)
    out["other"] = other
    return out


def compare_json(cli, *args: object) -> dict:
    result = cli("compare", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_json_contract_and_counts(cli, runs: dict[str, Path]) -> None:
    data = compare_json(cli, runs["base"], runs["sft"], runs["rl"], "--group-size", "16")
    assert set(data) == COMPARE_KEYS
    assert [r["label"] for r in data["runs"]] == ["base", "sft", "rl"]
    assert all(set(r) == RUN_KEYS for r in data["runs"])
    assert (data["before"], data["after"], data["test"]) == ("base", "rl", "fisher_exact")
    assert data["samples_compared"] == 400 and data["samples_left_out"] == 0
    assert data["group_size"] == 16 and data["alpha"] == 0.05
    assert len(data["transitions"]) == 9
    assert sum(t["count"] for t in data["transitions"]) == 400
    assert set(data["sets"]) == {"learned", "forgotten", "newly_learnable", "still_unreachable"}
    forgotten = data["sets"]["forgotten"]
    assert forgotten["count"] >= 30  # most of the 100 collapsed samples that had passes
    assert forgotten["share"] == pytest.approx(forgotten["count"] / 400, rel=1e-5)
    assert data["passed"] is True and data["gates"] == []
    # Three runs: each step between neighbours, with its own sets.
    assert [(s["before"], s["after"]) for s in data["steps"]] == [("base", "sft"), ("sft", "rl")]
    assert all(set(s["sets"]) == set(data["sets"]) for s in data["steps"])
    assert data["steps"][1]["sets"]["forgotten"] >= 30  # the collapse happens at sft -> rl
    assert compare_json(cli, runs["base"], runs["rl"])["steps"] == []
    # pass@k side by side: k = 1..8 for every run, rising over checkpoints at k = 1.
    assert all(list(r["pass_at_k"]) == [str(k) for k in range(1, 9)] for r in data["runs"])
    assert data["runs"][0]["pass_at_k"]["1"] < data["runs"][1]["pass_at_k"]["1"]


def test_report_and_compare_print_one_number_per_label(cli, runs: dict[str, Path]) -> None:
    data = compare_json(cli, runs["base"], runs["sft"])
    report = cli("report", runs["sft"], "--format", "json")
    mine = data["runs"][1]
    theirs = json.loads(report.stdout)
    for key in ("mean_score", "best_of_n", "high_variance_fraction", "pass_at_k", "categories"):
        assert mine[key] == theirs[key], key
    assert mine["expected_open_fraction"] == theirs["gate"]["expected_open_fraction"]


def test_forgotten_gate_fails_and_names_itself(cli, runs: dict[str, Path]) -> None:
    result = cli("compare", runs["base"], runs["rl"], "--fail-on-forgotten", "0.02")
    assert result.exit_code == 1
    assert "curate: check failed: fail-on-forgotten: forgotten share" in result.stderr
    ok = cli("compare", runs["base"], runs["sft"], "--fail-on-forgotten", "0.05")
    assert ok.exit_code == 0, ok.stderr
    data = compare_json(cli, runs["base"], runs["rl"], "--fail-on-forgotten", "0.5")
    assert data["gates"][0]["name"] == "fail-on-forgotten" and data["passed"] is True


def test_table_and_markdown(cli, runs: dict[str, Path], tmp_path: Path) -> None:
    table = cli("compare", runs["base"], runs["rl"])
    assert table.exit_code == 0, table.stderr
    for text in ("outcome transitions", "newly learnable", "still unreachable", "pass@8"):
        assert text in table.stdout
    summary = tmp_path / "summary.md"
    md = cli(
        "compare",
        runs["base"],
        runs["rl"],
        "-f",
        "markdown",
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert md.exit_code == 0, md.stderr
    assert md.stdout.startswith("## curate compare: `base` → `rl`")
    assert "| before \\ after | always incorrect | mixed | always correct |" in md.stdout
    assert summary.read_text() == md.stdout


def test_plots_and_per_sample_table(cli, runs: dict[str, Path], tmp_path: Path) -> None:
    evo, mat, table = tmp_path / "evo.png", tmp_path / "mat.svg", tmp_path / "ps.csv"
    args = [runs["base"], runs["sft"], runs["rl"]]
    result = cli("compare", *args, "--plot", "evolution", "-o", evo, "--per-sample", table)
    assert result.exit_code == 0, result.stderr
    assert evo.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli("compare", *args, "--plot", "matrix", "-o", mat, "-f", "json").exit_code == 0
    assert mat.read_text().lstrip().startswith("<?xml")
    rows = pl.read_csv(table)
    assert rows.height == 400
    assert {"pass_rate_before", "wilson_low_after", "p_value", "forgotten"} <= set(rows.columns)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{base}"], "compare needs at least two runs"),
        (["{base}", "{other}"], "no sample is scored in every run"),
        (["{base}", "{rl}", "--plot", "matrix"], "--plot needs -o FILE"),
        (["{base}", "{rl}", "--plot", "matrix", "-o", "x.gif"], "--plot writes .png"),
        (["{base}", "{rl}", "--per-sample", "x.txt"], "unknown table format"),
        (["{base}", "{missing}"], "missing.parquet"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    cli, runs: dict[str, Path], tmp_path: Path, args: list[str], message: str
) -> None:
    paths = {**{k: str(v) for k, v in runs.items()}, "missing": str(tmp_path / "missing.parquet")}
    result = cli("compare", *(a.format(**paths) for a in args))
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_bad_input_in_a_real_process(run_curate, runs: dict[str, Path]) -> None:
    proc = run_curate("compare", runs["base"])
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "curate: error: compare needs at least two runs (RUN_A RUN_B [RUN_C ...])"
    )


# -- filter --against -------------------------------------------------------------------


def test_filter_against_keeps_the_sets_compare_counts(
    cli, runs: dict[str, Path], tmp_path: Path
) -> None:
    data = compare_json(cli, runs["base"], runs["rl"])
    counts = {name: s["count"] for name, s in data["sets"].items()}
    for name in ("learned", "forgotten", "newly-learnable", "still-unreachable"):
        out = tmp_path / f"{name}.jsonl"
        result = cli("filter", runs["rl"], "--against", runs["base"], "--keep", name, "-o", out)
        assert result.exit_code == 0, result.stderr
        kept = pl.read_ndjson(out) if out.stat().st_size else pl.DataFrame()
        assert kept.height == counts[name.replace("-", "_")], name
    # A transition by name, and a union with a category.
    trans = {(t["before"], t["after"]): t["count"] for t in data["transitions"]}
    out = tmp_path / "t.jsonl"
    result = cli(
        "filter", runs["rl"], "--against", runs["base"], "--keep", "correct-to-incorrect",
        "--keep", "incorrect-to-mixed", "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    expected = trans[("always_correct", "always_incorrect")] + trans[("always_incorrect", "mixed")]
    assert f"kept {expected} of 400" in result.stdout
    rejects = pl.read_ndjson(tmp_path / "t.rejects.jsonl")
    assert "mixed-to-mixed" in set(rejects["drop_reason"])


def test_filter_against_verl_export(cli, runs: dict[str, Path], tmp_path: Path) -> None:
    """Comparison sets go through the trainer formats like any selection."""
    data = tmp_path / "samples.jsonl"
    data.write_text(
        "".join(json.dumps({"sample_id": f"q{i}", "question": f"{i}+1?", "answer": str(i + 1)})
                + "\n" for i in range(400))
    )  # fmt: skip
    out = tmp_path / "train.parquet"
    result = cli(
        "filter", runs["rl"], "--against", runs["base"], "--keep", "newly-learnable",
        "--data", data, "--format", "verl", "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    frame = pl.read_parquet(out)
    assert {"prompt", "reward_model", "extra_info"} <= set(frame.columns)
    assert (
        frame.height
        == compare_json(cli, runs["base"], runs["rl"])["sets"]["newly_learnable"]["count"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--keep", "learned"], "--keep learned compares two runs: name the earlier one"),
        (["--against", "{base}", "--keep", "learnt"], "unknown --keep value 'learnt'"),
        (["--against", "{other}", "--keep", "learned"], "no sample is scored in every run"),
    ],
)
def test_filter_against_bad_input(
    cli, runs: dict[str, Path], tmp_path: Path, args: list[str], message: str
) -> None:
    paths = {k: str(v) for k, v in runs.items()}
    out = tmp_path / "k.jsonl"
    result = cli("filter", runs["rl"], *(a.format(**paths) for a in args), "-o", out)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_run_directory_against_its_own_scores_changes_nothing(
    cli, run_dir: Path, scores_csv: Path
) -> None:
    """The same rollouts as a run directory and as a CSV table: every sample on the
    diagonal of the transition table, nothing significant."""
    data = compare_json(cli, run_dir, scores_csv)
    assert data["samples_compared"] == data["runs"][0]["samples"] - data["samples_left_out"]
    assert data["significant"] == 0
    assert all(t["count"] == 0 for t in data["transitions"] if t["before"] != t["after"])
    assert data["runs"][0]["pass_at_k"] == data["runs"][1]["pass_at_k"]


def test_adaptive_runs_are_named_in_a_warning(cli, runs: dict[str, Path], tmp_path: Path) -> None:
    from curate.store.run_dir import RolloutStore

    store = RolloutStore(tmp_path / "adaptive")
    store.create()
    store.write_manifest({"model": "m", "backend": "fake", "adaptive": True, "runs": 8})
    store.append(pl.read_parquet(runs["base"]).with_columns(pl.lit(None, pl.String).alias("error")))
    data = compare_json(cli, store.run_dir, runs["rl"])
    assert any(w.startswith("adaptive: adaptive, so each sample's") for w in data["warnings"])


def test_filter_against_a_run_with_fewer_samples(cli, tmp_path: Path) -> None:
    before = tmp_path / "before.parquet"
    after = tmp_path / "after.parquet"
    long_frame({"a": [0] * 8, "b": [1] * 8}).write_parquet(before)
    long_frame({"a": [1] * 7 + [0], "b": [1] * 8, "new": [1, 0] * 4}).write_parquet(after)
    out = tmp_path / "k.jsonl"
    result = cli("filter", after, "--against", before, "--keep", "learned", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert pl.read_ndjson(out)["sample_id"].to_list() == ["a"]
    reasons = dict(
        pl.read_ndjson(tmp_path / "k.rejects.jsonl").select("sample_id", "drop_reason").rows()
    )
    assert reasons == {"b": "correct-to-correct", "new": "not scored in the --against run"}
    # A category keeps samples the earlier run lacks.
    result = cli(
        "filter", after, "--against", before, "--keep", "learned", "--keep", "mixed", "-o", out
    )
    assert sorted(pl.read_ndjson(out)["sample_id"]) == ["a", "new"]


def test_docs_list_every_json_key(cli, runs: dict[str, Path]) -> None:
    import re

    from tests.conftest import ROOT

    text = (ROOT / "docs" / "reference" / "json.md").read_text()
    section = text.split("## `curate compare --format json`", 1)[1].split("\n## ", 1)[0]
    listed = {
        key
        for line in section.splitlines()
        if line.startswith("| `")
        for key in re.findall(r"`([a-z_]+)`", line.split("|")[1])
    }
    data = compare_json(cli, runs["base"], runs["rl"])
    assert set(data) <= listed, set(data) - listed
