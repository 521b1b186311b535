"""`plot_run`: one plot of a run or score table, written to disk (the library call
behind `curate plot`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD
from curate.errors import InputError, UsageError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The group sizes of the gate curve.
GATE_CURVE_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def default_plot_path(run: str | os.PathLike[str], kind: str) -> Path:
    """RUN/plots/KIND.png for a run directory, else TABLE.KIND.png beside the table."""
    run = Path(run)
    if run.is_dir():
        return run / "plots" / f"{kind}.png"
    return run.with_name(f"{run.stem}.{kind}.png")


def plot_run(
    run: str | os.PathLike[str],
    *,
    kind: str = "variance",
    output: str | os.PathLike[str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    sample: str | None = None,
) -> Path:
    """Draw the variance-plot method's plot, the pass-rate histogram (mean score with
    partial credit) or the gate curve
    (`kind`: one of `PLOT_KINDS`) of `run` into `output` (.png, .svg or .pdf; default
    `default_plot_path`), and return the path written. `sample` is the sample the
    `reflective` kind draws (a --grader r3 run's reference tokens), for that kind only."""
    from curate.analysis import load_analysis
    from curate.plots import PLOT_KINDS, gate_figure, histogram_figure, save_figure, variance_figure
    from curate.stats.dataset import gate_curve

    if kind not in PLOT_KINDS:
        raise UsageError(f"unknown plot kind '{kind}' (choose from {', '.join(PLOT_KINDS)})")
    run = Path(run)
    if (sample is not None) != (kind == "reflective"):
        raise UsageError("a SAMPLE goes with --kind reflective, and only with it")
    target = Path(output) if output is not None else default_plot_path(run, kind)
    if kind == "reflective":
        assert sample is not None
        fig = _reflective_plot(run, sample)
        if output is None:
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in sample)
            target = run / "plots" / f"reflective-{safe}.png"
            target.parent.mkdir(exist_ok=True)
        return save_figure(fig, target)
    if kind == "length":
        fig = _length_plot(run)
        if output is None and run.is_dir():
            target.parent.mkdir(exist_ok=True)
        return save_figure(fig, target)

    loaded = load_analysis(run, threshold=threshold, group_size=group_size)
    if kind == "variance":
        fig = variance_figure(
            loaded.per_sample, title=f"Baseline variance: {run.name}", threshold=threshold
        )
    elif kind == "histogram":
        # Partial credit: the full-credit rate is 0 for a sample that scores 0.5 every
        # time, which the 0 bar would call "always incorrect"; the mean score is 0
        # exactly when every rollout scored 0, so its bars keep the report's outcomes.
        column = "pass_rate" if loaded.summary.binary_scores else "mean_score"
        fig = histogram_figure(loaded.per_sample, column=column)
    else:
        # The user's G is on the curve itself, so the marked value is computed, not
        # interpolated: the number `curate report` prints for "mixed groups at G".
        sizes = sorted({*GATE_CURVE_SIZES, group_size})
        # An adaptive run's curve is model-based, as its report's figures are.
        adaptive_n = loaded.summary.extra.get("nominal_runs")
        curve = gate_curve(
            loaded.per_sample,
            loaded.prior,
            sizes,
            binary=loaded.binary,
            model=loaded.model,
            nominal_runs=adaptive_n if isinstance(adaptive_n, int) else None,
            intervals=True,  # shaded past the rollouts taken
        )
        fig = gate_figure(curve, group_size=group_size)
    if output is None and run.is_dir():
        # Only now: bad input must not leave a new plots/ directory behind.
        target.parent.mkdir(exist_ok=True)
    return save_figure(fig, target)


def _reflective_plot(run: Path, sample: str) -> Figure:
    """`sample`'s reference tokens shaded by spread, from the run's stored certainties."""
    from curate.analysis.reflective import load_reflective
    from curate.plots.reflective import reflective_figure

    samples = load_reflective(run)
    if sample not in samples:
        held = f"; it holds {len(samples)} samples, e.g. {next(iter(samples))!r}" if samples else ""
        raise UsageError(f"{run}: no reference certainties for sample {sample!r}{held}")
    return reflective_figure(samples[sample], title=f"reflective tokens: {run.name} / {sample}")


def _length_plot(run: Path) -> Figure:
    """The length plot of `run`: the report's own `lengths` figures."""
    from curate.analysis.lengths import load_lengths
    from curate.plots import length_figure
    from curate.stats.lengths import outcome_expr
    from curate.store.scores import load_scores

    source = load_scores(run)  # bad input: the scores' own one-line error, first
    lengths = load_lengths(run, source.manifest)
    if lengths is None:
        raise InputError(
            "no completion_tokens column: the length plot needs token counts", path=run
        )
    rows = lengths.rows.with_columns(outcome_expr())
    return length_figure(rows, lengths.section, title=f"Completion length: {run.name}")
