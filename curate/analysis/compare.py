"""`compare_runs`: runs of the same samples under different models or checkpoints,
matched by sample id (the library call behind `curate compare` and `filter --against`).

Each run is read once (`load_aggregated`) and summarised by `analyze`, the function
behind `curate report`, on the samples every run scored: so a run's mean score,
best-of-N, high-variance share, mixed groups at G and pass@k here are the report's
figures on those samples (equal to `curate report`'s when no sample is left out).
The first and the last run are then compared sample by sample (`curate.stats.compare`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD
from curate.errors import InputError, UsageError
from curate.stats.compare import (
    DEFAULT_ALPHA,
    FISHER,
    MANN_WHITNEY,
    compare_samples,
    forecast_check,
    mann_whitney_p_values,
    match_samples,
    set_counts,
    transition_counts,
)

if TYPE_CHECKING:
    import polars as pl

    from curate.analysis.load import AggregatedScores
    from curate.stats.dataset import DatasetSummary


@dataclass
class RunView:
    """One run of a comparison: its statistics on the samples every run scored."""

    label: str
    path: Path
    samples: int  # samples in the run (scored or not)
    left_out: int  # of those, not scored in every run: not compared
    per_sample: pl.DataFrame  # the common samples' statistics (`stats_from_aggregate`)
    summary: DatasetSummary  # `analyze`'s summary of the common samples
    binary: bool
    adaptive: bool = False  # an adaptive run (its raw pass rates are biased by stopping)


@dataclass
class Step:
    """Two neighbouring runs of a comparison over more than two runs, sample by sample."""

    before: str
    after: str
    test: str
    significant: int
    sets: dict[str, int]


@dataclass
class Comparison:
    """What `curate compare` prints: every run's figures on the common samples, and the
    first run against the last sample by sample."""

    runs: list[RunView]
    common: int  # samples scored in every run
    left_out: int  # samples some run has but not every run scored
    samples: pl.DataFrame  # per-sample comparison (`compare_samples`), first vs last
    test: str  # FISHER or MANN_WHITNEY
    alpha: float
    group_size: int
    threshold: float
    transitions: list[tuple[str, str, int]]
    sets: dict[str, int]
    # With more than two runs: each pair of neighbours (run i -> run i+1), in order.
    steps: list[Step] = field(default_factory=list)
    # The first run's pass rates as a forecast of the last's (`forecast_check`).
    forecast: dict[str, object] = field(default_factory=dict)

    @property
    def before(self) -> RunView:
        return self.runs[0]

    @property
    def after(self) -> RunView:
        return self.runs[-1]

    @property
    def significant(self) -> int:
        return int(self.samples["significant"].sum())

    def share(self, name: str) -> float:
        """A named set's share of the compared samples."""
        return self.sets[name] / self.common if self.common else 0.0


def run_labels(paths: Sequence[Path]) -> list[str]:
    """Short names for the runs: the directory or file name (its stem for a table),
    the whole path where two would read the same."""
    names = [p.name if p.is_dir() or not p.suffix else p.stem for p in paths]
    if len(set(names)) == len(names):
        return names
    return [str(p) for p in paths]


def compare_runs(
    paths: Sequence[str | os.PathLike[str]],
    *,
    alpha: float = DEFAULT_ALPHA,
    group_size: int = DEFAULT_GROUP_SIZE,
    threshold: float = DEFAULT_THRESHOLD,
) -> Comparison:
    """Read each run once, keep the samples every run scored, summarise each run on
    them and compare the first run with the last (see the module docstring).

    Fewer than two runs, or runs without a sample scored in all of them, are usage
    and input errors (exit 2)."""
    import polars as pl

    from curate.analysis.load import load_aggregated

    run_paths = [Path(p) for p in paths]
    if len(run_paths) < 2:
        raise UsageError("compare needs at least two runs (RUN_A RUN_B [RUN_C ...])")
    if not 0.0 < alpha < 1.0:
        raise UsageError(f"--alpha must be between 0 and 1 (got {alpha:g})")
    loaded = [load_aggregated(p) for p in run_paths]
    labels = run_labels(run_paths)
    # Ids matched as text (a CSV may read them as integers), in polars: Python sets of
    # 100,000 strings cost more than the statistics.
    ids = [
        agg.aggregate.select(pl.col("sample_id").cast(pl.String), "n_rollouts") for agg in loaded
    ]
    common = ids[0].filter(pl.col("n_rollouts") > 0).select("sample_id")
    for frame in ids[1:]:
        common = common.join(frame.filter(pl.col("n_rollouts") > 0), on="sample_id", how="semi")
    common_ids = common["sample_id"]
    every = pl.concat([frame.select("sample_id") for frame in ids])["sample_id"].n_unique()
    if common_ids.len() == 0:
        names = ", ".join(str(p) for p in run_paths)
        raise InputError(
            f"no sample is scored in every run ({names}): compare runs of the same samples "
            "(sample ids are matched)"
        )
    views = [
        _view(agg, label, common_ids, threshold=threshold, group_size=group_size)
        for agg, label in zip(loaded, labels, strict=True)
    ]

    def pair(i: int, j: int) -> tuple[str, pl.DataFrame]:
        """Runs i and j sample by sample: the test used and `compare_samples`' frame."""
        matched = match_samples(views[i].per_sample, views[j].per_sample)
        if views[i].binary and views[j].binary:
            return FISHER, compare_samples(matched, alpha=alpha)
        p_values = mann_whitney_p_values(
            _scored_rows(loaded[i], common_ids), _scored_rows(loaded[j], common_ids)
        )
        return MANN_WHITNEY, compare_samples(matched, alpha=alpha, p_values=p_values)

    test, compared = pair(0, len(views) - 1)
    steps: list[Step] = []
    if len(views) > 2:  # checkpoints: what each step between neighbours changed
        for i in range(len(views) - 1):
            step_test, frame = pair(i, i + 1)
            steps.append(
                Step(
                    before=views[i].label,
                    after=views[i + 1].label,
                    test=step_test,
                    significant=int(frame["significant"].sum()),
                    sets=set_counts(frame),
                )
            )
    return Comparison(
        runs=views,
        common=common_ids.len(),
        left_out=every - common_ids.len(),
        samples=compared,
        test=test,
        alpha=alpha,
        group_size=group_size,
        threshold=threshold,
        transitions=transition_counts(compared),
        sets=set_counts(compared),
        steps=steps,
        forecast=forecast_check(compared, binary=test == FISHER),
    )


def _scored_rows(agg: AggregatedScores, common: pl.Series) -> pl.LazyFrame:
    """The run's scored rollouts of the common samples (sample_id, score)."""
    import polars as pl

    return agg.rollouts.filter(
        pl.col("score").is_not_null() & pl.col("sample_id").cast(pl.String).is_in(common.implode())
    ).select(pl.col("sample_id").cast(pl.String), "score")


def _view(
    agg: AggregatedScores,
    label: str,
    common: pl.Series,
    *,
    threshold: float,
    group_size: int,
) -> RunView:
    """`analyze` (the report's computation) on the run's common samples."""
    import polars as pl

    from curate.analysis.load import deepened_aggregate
    from curate.stats.adaptive import nominal_runs
    from curate.stats.analysis import analyze

    frame = agg.aggregate.with_columns(pl.col("sample_id").cast(pl.String))
    scored = frame.filter(pl.col("n_rollouts") > 0)
    # Every scored sample common (the usual case): no 100,000-id membership test.
    whole = scored.height == common.len()
    kept = scored if whole else frame.filter(pl.col("sample_id").is_in(common.implode()))
    manifest = agg.manifest
    adaptive = manifest is not None and manifest.adaptive
    # A deepened run's prior sees its deepening rows, as the report's does.
    deepened = deepened_aggregate(agg.source)
    prior_aggregate = None
    if deepened is not None:
        prior_aggregate = deepened.aggregate.filter(
            pl.col("sample_id").cast(pl.String).is_in(common.implode())
        )
    analysis = analyze(
        # Read again only for partial credit (the score model) or error messages.
        agg.rollouts
        if whole
        else agg.rollouts.filter(pl.col("sample_id").cast(pl.String).is_in(common.implode())),
        threshold=threshold,
        group_size=group_size,
        adaptive=adaptive,
        aggregate=kept,
        nominal_runs=nominal_runs(manifest),
        prior_aggregate=prior_aggregate,
    )
    return RunView(
        label=label,
        path=agg.path,
        samples=frame.height,
        left_out=frame.height - kept.height,
        per_sample=analysis.per_sample,
        summary=analysis.summary,
        binary=analysis.binary,
        adaptive=adaptive,
    )


def per_sample_table(comparison: Comparison) -> pl.DataFrame:
    """The per-sample comparison as users read it (`curate compare --per-sample`): each
    side's rollouts, passes, pass rate with its Wilson 95% interval (the report's) and
    outcome, suffixed `_before` and `_after`; the change, the test's p-value, whether it
    is significant, and one boolean column per named set."""
    from curate.stats.compare import SETS

    frame = comparison.samples
    sides = [c for c in frame.columns if c.endswith(("_a", "_b"))]
    renamed = frame.rename(
        {c: c[:-2] + ("_before" if c.endswith("_a") else "_after") for c in sides}
    )
    order = [
        f"{stat}_{side}"
        for side in ("before", "after")
        for stat in (
            "outcome",
            "n_rollouts",
            "successes",
            "pass_rate",
            "wilson_low",
            "wilson_high",
            "mean_score",
        )
    ]
    return renamed.select("sample_id", *order, "change", "p_value", "significant", *SETS).sort(
        "sample_id"
    )
