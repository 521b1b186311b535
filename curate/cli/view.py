"""`curate view`: runs as a static site to read in a browser (parse the options, call
`curate.view.build_site`, say where the site went and how large it is)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.options import GroupSizeOpt, ThresholdOpt
from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD
from curate.view.site import DEFAULT_MAX_CHARS  # imports no polars: `--help` stays light


@handle_errors
def view(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN [RUN2 ...]",
            help="Run directories written by `curate eval` (or score tables); with several, "
            "the same samples side by side and the first run against the last.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Directory for the site (index.html and its data); a site written here "
            "before is replaced.",
            show_default=False,
        ),
    ],
    open_browser: Annotated[
        bool,
        typer.Option("--open", help="Open the site in the default browser when there is one."),
    ] = False,
    max_chars: Annotated[
        int,
        typer.Option(
            "--max-chars",
            min=0,
            help="Keep at most this many characters of each completion and reasoning "
            "(0: all of them).",
        ),
    ] = DEFAULT_MAX_CHARS,
    group_by: Annotated[
        str | None,
        typer.Option(
            "--group-by",
            metavar="COLUMN",
            help="Break the figures down and label the table's samples by this column of "
            "the run's samples.parquet \\[default: data_source, when present].",
            show_default=False,
        ),
    ] = None,
    threshold: ThresholdOpt = DEFAULT_THRESHOLD,
    group_size: GroupSizeOpt = DEFAULT_GROUP_SIZE,
) -> None:
    """Write a static site of the runs' figures, a sample table and every rollout."""
    from curate.view import build_site
    from curate.view.site import open_in_browser

    site = build_site(
        runs,
        output,
        max_chars=max_chars or None,
        group_by=group_by,
        threshold=threshold,
        group_size=group_size,
    )
    capped = f", {site.capped:,} texts cut at {max_chars:,} characters" if site.capped else ""
    print(
        f"wrote {site.out}/index.html: {site.samples:,} samples, {site.rollouts:,} rollouts, "
        f"{site.files:,} files, {site.bytes / 1e6:.1f} MB{capped}"
    )
    if open_browser and not open_in_browser(site.out):
        print(f"no browser to open; open {site.out / 'index.html'} yourself")
