"""`curate hint`: hints for a run's collapsed prompts, rolled out beside the run: parse the
options, call `curate.hinting.run.hint_run`, print the per-level summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.errors import UsageError
from curate.hinting.summary import DEFAULT_BAND


@handle_errors
def hint(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run directory written by `curate eval` (fixed N).", show_default=False
        ),
    ],
    stratum: Annotated[
        str,
        typer.Option(
            "--stratum",
            metavar="NAME",
            help="Which collapsed prompts to hint: incorrect (every rollout failed) or "
            "correct (every rollout passed).",
        ),
    ] = "incorrect",
    rollouts: Annotated[
        int | None,
        typer.Option(
            "--rollouts",
            "-n",
            help="Rollouts per hinted prompt, G \\[default: the run's N].",
            show_default=False,
        ),
    ] = None,
    band: Annotated[
        str,
        typer.Option(
            "--band",
            metavar="LOW,HIGH",
            help="The pass-rate band around 1/2 a recommended level falls in.",
        ),
    ] = f"{DEFAULT_BAND[0]:g},{DEFAULT_BAND[1]:g}",
    hint_model: Annotated[
        str | None,
        typer.Option(
            "--hint-model",
            metavar="MODEL",
            help="Have this model write the hints from each reference (one greedy reply per "
            "prompt and level) instead of the templates.",
            show_default=False,
        ),
    ] = None,
    hint_backend: Annotated[
        str | None,
        typer.Option(
            "--hint-backend",
            metavar="NAME",
            help="The backend serving --hint-model \\[default: the run's, with its options].",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format", "-f", metavar="table|json", help="table for people, json for tools."
        ),
    ] = "table",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress or start lines on stderr.")
    ] = False,
) -> None:
    """Hint the prompts a run never (or always) solves, from their reference solutions, and
    roll the hinted prompts out with the run's model, sampling and grader (SAGE)."""
    from curate.evaluation.progress import make_progress
    from curate.hinting.run import HintRequest, hint_run, outcome_json, outcome_lines

    if format not in ("table", "json"):
        raise UsageError(f"--format must be table or json, not {format!r}")
    if hint_backend is not None and hint_model is None:
        raise UsageError("--hint-backend only applies with --hint-model")
    request = HintRequest(
        run_dir=run,
        stratum=stratum,
        group_size=rollouts,
        band=parse_band(band),
        hint_model=hint_model,
        hint_backend=hint_backend,
    )

    def announce(checked: object) -> None:
        for line in checked.lines():  # type: ignore[attr-defined]
            print(line, file=sys.stderr)

    def status(line: str) -> None:
        print(f"hint: {line}", file=sys.stderr, flush=True)

    outcome = hint_run(
        request,
        make_progress(quiet),
        announce=None if quiet else announce,
        status=None if quiet else status,
    )
    if format == "json":
        print(json.dumps(outcome_json(outcome), indent=2))
        return
    for line in outcome_lines(outcome):
        print(line)
    print(f"next: curate filter {outcome.hinted_dir} --format trl -o hinted.jsonl")


def parse_band(text: str) -> tuple[float, float]:
    """LOW,HIGH as two floats, or a one-line UsageError."""
    parts = text.split(",")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise UsageError(f"--band must be LOW,HIGH (two numbers), not {text!r}") from None
    return low, high
