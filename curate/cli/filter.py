"""`curate filter`: write the learnable subset (and the rejects, with reasons)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, RunArg, ThresholdOpt


def rejects_path(output: Path) -> Path:
    """OUT.jsonl -> OUT.rejects.jsonl, beside the output."""
    return output.with_name(f"{output.stem}.rejects{output.suffix}")


@handle_errors
def filter_samples(
    run: RunArg,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Kept samples: .jsonl or .parquet.", show_default=False),
    ],
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep",
            help="Categories to keep (repeatable): high-variance, low-variance, mixed, "
            "always-correct, always-incorrect, all.",
        ),
    ] = None,
    pass_rate: Annotated[
        str | None,
        typer.Option("--pass-rate", help="Also require LO <= pass rate <= HI, e.g. 0.1:0.9."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Original samples (for a bare score table): their fields are written out.",
        ),
    ] = None,
    id_field: Annotated[
        str | None,
        typer.Option(help="Id column in --data matching sample_id (default: sample_id, else id)."),
    ] = None,
    threshold: ThresholdOpt = 0.01,
    group_size: GroupSizeOpt = 8,
) -> None:
    """Keep the samples with learning signal; write the rest beside them with a drop_reason."""
    import polars as pl

    from curate.filtering import FilterSpec, attach_fields, decide, parse_keep, parse_range
    from curate.stats.analysis import analyze
    from curate.store.atomic import atomic_path
    from curate.store.scores import load_scores
    from curate.store.tables import read_table, table_format

    if table_format(output) == "csv":
        from curate.errors import UsageError

        raise UsageError(f"{output}: filter writes .jsonl or .parquet")
    spec = FilterSpec(
        keep=parse_keep(keep or ["high-variance"]),
        pass_rate=parse_range(pass_rate) if pass_rate else None,
    )
    source = load_scores(run)
    samples = read_table(data) if data is not None else source.samples()
    if id_field is None:
        id_field = "sample_id" if samples is None or "sample_id" in samples.columns else "id"
    analysis = analyze(source.rollouts, threshold=threshold, group_size=group_size)
    decisions = decide(analysis.per_sample, spec)
    rows = attach_fields(decisions, samples, id_field=id_field, source=data or run)
    kept = rows.filter(pl.col("kept")).drop("kept", "drop_reason")
    dropped = rows.filter(~pl.col("kept")).drop("kept")
    rejects = rejects_path(output)
    # Both files appear together or not at all.
    with atomic_path(output) as tmp_kept, atomic_path(rejects) as tmp_rej:
        _write(kept, tmp_kept, output)
        _write(dropped, tmp_rej, rejects)
    total = rows.height
    print(f"kept {kept.height} of {total} samples -> {output}")
    if dropped.height:
        print(f"dropped {dropped.height} -> {rejects}")
        counts = dropped.group_by("drop_reason").len().sort("len", descending=True)
        for reason, count in counts.rows():
            print(f"  {count:>8}  {reason}")
    unmatched = analysis.per_sample.height - total
    if unmatched:
        print(f"note: {unmatched} scored sample(s) had no matching row in the samples file")


def _write(frame: object, tmp: Path, final: Path) -> None:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    if final.suffix.lower() in (".parquet", ".pq"):
        frame.write_parquet(tmp)
    else:
        frame.write_ndjson(tmp)
