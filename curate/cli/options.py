"""Options shared by several commands (Annotated aliases, typer style)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RunArg = Annotated[
    Path,
    typer.Argument(
        help="A run directory written by `curate eval`, or a Parquet/CSV/JSONL table with "
        "columns sample_id and score (optional rollout_idx, error).",
        show_default=False,
    ),
]
ThresholdOpt = Annotated[
    float,
    typer.Option(
        "--threshold", "-t", min=0.0, help="Variance above which a mixed sample is high-variance."
    ),
]
GroupSizeOpt = Annotated[
    int,
    typer.Option(
        "--group-size", "-g", min=1, help="Training group size G for the gate (mixed-group) odds."
    ),
]
