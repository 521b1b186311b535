"""One number per label: "mixed groups at G" reads the same in the report
table, JSON, Markdown, the compute multiplier's lines, the by-group breakdown, the
per-sample column and the gate plot, on every kind of score and n against G."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console

import curate.plots
from curate.analysis import load_analysis
from curate.plots.run import plot_run
from curate.report.build import build_report
from curate.report.render import render_json, render_markdown, render_table

G = 8


def scores_table(path: Path, n_lo: int, n_hi: int, values: tuple[float, ...], seed: int) -> Path:
    """60 samples with n ~ U{n_lo..n_hi} rollouts each, scores drawn from `values` with
    per-sample rates, two data sources; written as Parquet."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(60):
        rates = rng.dirichlet([0.5] * len(values))
        for r in range(int(rng.integers(n_lo, n_hi + 1))):
            score = float(rng.choice(values, p=rates))
            rows.append((f"s{i:02d}", r, score, "math" if i % 3 else "code"))
    frame = pl.DataFrame(
        rows,
        schema={
            "sample_id": pl.String,
            "rollout_idx": pl.Int32,
            "score": pl.Float64,
            "data_source": pl.String,
        },
        orient="row",
    )
    frame.write_parquet(path)
    return path


CASES = {
    "binary n >= G": (8, 12, (0.0, 1.0)),
    "binary n < G": (6, 6, (0.0, 1.0)),
    "binary ragged n": (2, 14, (0.0, 1.0)),
    "partial credit": (3, 10, (0.0, 0.25, 0.5, 1.0)),
}


def plotted_value(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The percentage the gate plot prints beside the marked group size."""
    figures = []
    monkeypatch.setattr(curate.plots, "save_figure", lambda fig, target: figures.append(fig))
    plot_run(path, kind="gate", output=path.with_suffix(".png"), group_size=G)
    (fig,) = figures
    texts = [t.get_text() for t in fig.axes[0].texts]
    (text,) = [t for t in texts if t.startswith(f"mixed groups at G={G}: ")]
    return text.split(": ")[1].split("\n")[0]


@pytest.mark.parametrize("case", list(CASES))
def test_mixed_groups_at_g_is_one_number(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n_lo, n_hi, values = CASES[case]
    path = scores_table(tmp_path / "scores.parquet", n_lo, n_hi, values, seed=len(case))
    report = build_report(path, group_size=G)
    s = report.summary
    assert s.binary_scores == (values == (0.0, 1.0))
    want = f"{s.gate['expected_open_fraction']:.1%}"
    label = f"mixed groups at G={G}"

    data = json.loads(render_json(s, []))
    assert f"{data['gate']['expected_open_fraction']:.1%}" == want
    assert (
        data["compute_multiplier"]["expected_open_fraction"]
        == data["gate"]["expected_open_fraction"]
    )

    md = render_markdown(s, [])
    # The share, then its 95% interval when it lies past some sample's rollouts.
    interval = r"(?: \(95%: [0-9.]+%-[0-9.]+%\))?"
    assert re.search(rf"\| {re.escape(label)} \| {re.escape(want)}{interval} \|", md)
    buf = io.StringIO()
    render_table(s, [], Console(file=buf, width=80, color_system=None))
    table = buf.getvalue()
    assert re.search(rf"│ {re.escape(label)} +│ +{re.escape(want)}{interval} │", table)

    # The multiplier's lines name the same share at G, whatever they recommend.
    m = s.compute_multiplier
    said = f"instead of {want} at G={G}" if m.recommended > 1 else f"{label}: {want}"
    assert said in table and said in md
    # The reason names it too, unless it says the data cannot choose a multiplier.
    assert f"{want}" in m.reason or not m.decided

    # The per-sample column (filter, allocate) and the by-group rows average to it.
    per_sample = load_analysis(path, group_size=G).per_sample
    mean = float(per_sample["gate_open_probability"].mean())  # type: ignore[arg-type]
    assert mean == pytest.approx(s.gate["expected_open_fraction"], abs=1e-12)
    groups = s.by_group
    assert s.group_by == "data_source" and {g["group"] for g in groups} == {"math", "code"}
    pooled = sum(g["samples"] * g["expected_open_fraction"] for g in groups) / s.samples
    assert pooled == pytest.approx(s.gate["expected_open_fraction"], abs=1e-12)

    assert plotted_value(path, monkeypatch) == want


def test_gate_plot_marks_a_group_size_off_the_default_curve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G = 10 is not one of the curve's default sizes: the plot computes it rather than
    interpolate, so it still prints the report's number."""
    path = scores_table(tmp_path / "scores.parquet", 4, 6, (0.0, 1.0), seed=3)
    figures = []
    monkeypatch.setattr(curate.plots, "save_figure", lambda fig, target: figures.append(fig))
    plot_run(path, kind="gate", output=tmp_path / "g.png", group_size=10)
    texts = [t.get_text() for t in figures[0].axes[0].texts]
    want = f"{build_report(path, group_size=10).summary.gate['expected_open_fraction']:.1%}"
    assert any(t.startswith(f"mixed groups at G=10: {want}") for t in texts)


def test_an_adaptive_runs_plot_shows_its_model_based_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adaptive run's headline is model-based; its gate plot must mark the
    same figure, not the raw-rate curve."""
    from curate.evaluation.adaptive.policy import AdaptivePolicy, replay
    from curate.store.run_dir import RolloutStore

    rng = np.random.default_rng(3)
    rates = rng.beta(2, 14, size=80)
    sequences = {
        f"s{i:02d}": [float(rng.random() < p) for _ in range(8)] for i, p in enumerate(rates)
    }
    trace = replay(AdaptivePolicy(max_runs=8), sequences)
    rows = [
        (sid, r, score)
        for sid, outcomes in trace.outcomes.items()
        for r, score in enumerate(outcomes)
    ]
    store = RolloutStore(tmp_path / "run")
    store.create()
    store.write_manifest(
        {
            "model": "m",
            "backend": "fake",
            "runs": 8,
            "adaptive": True,
            "adaptive_policy": {"max_runs": 8},
        }
    )
    frame = pl.DataFrame(
        rows, schema=["sample_id", "rollout_idx", "score"], orient="row"
    ).with_columns(
        pl.col("rollout_idx").cast(pl.Int32), pl.lit(None, dtype=pl.String).alias("error")
    )
    store.append(frame)
    s = build_report(store.run_dir, group_size=G).summary
    assert s.extra.get("model_based")  # the run is read as adaptive
    assert plotted_value(store.run_dir, monkeypatch) == f"{s.gate['expected_open_fraction']:.1%}"
