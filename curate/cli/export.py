"""`curate export`: a run's rollouts as training data (SFT, DPO pairs, offline groups,
balanced groups): parse the options, call `curate.exports.rollouts.export_rollouts`,
report what was written."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.core.seeds import DEFAULT_SEED
from curate.stats.balanced import DEFAULT_BALANCED_SIZE, DEFAULT_OBJECTIVE
from curate.stats.weights import DEFAULT_DELTA

GROUPS = "Groups (--as groups, balanced)"


class Kind(StrEnum):
    sft = "sft"
    dpo = "dpo"
    groups = "groups"
    balanced = "balanced"


class Style(StrEnum):
    conversational = "conversational"
    standard = "standard"


class Reasoning(StrEnum):
    keep = "keep"
    drop = "drop"


class Objective(StrEnum):
    linear = "linear"
    log = "log"
    sqrt = "sqrt"
    arcsin = "arcsin"


DEFAULT_WEIGHTS = Objective(DEFAULT_OBJECTIVE)


@handle_errors
def export(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run directory written by `curate eval` (its completions are the data).",
            show_default=False,
        ),
    ],
    kind: Annotated[
        Kind,
        typer.Option(
            "--as",
            metavar="KIND",
            help="sft: right completions per prompt (rejection sampling); dpo: "
            "right/wrong pairs; groups: each prompt's rollouts with rewards and the "
            "objective weight; balanced: even right/wrong groups with corrected advantages.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="OUT",
            help="A .jsonl or .parquet file (written whole or not at all).",
            show_default=False,
        ),
    ],
    style: Annotated[
        Style | None,
        typer.Option(
            metavar="STYLE",
            help="conversational: message lists; standard: text (a chat run's prompts "
            "rendered with the model's chat template) \\[default: the run's mode].",
            show_default=False,
        ),
    ] = None,
    reasoning: Annotated[
        Reasoning,
        typer.Option(
            metavar="R",
            help="keep: the model's reasoning stays in the completion, in its think "
            "markers; drop: the answer only.",
        ),
    ] = Reasoning.keep,
    per_prompt: Annotated[
        int | None,
        typer.Option(
            "--per-prompt",
            "-k",
            metavar="K",
            help="Most sft completions or dpo pairs per prompt \\[default: all].",
            show_default=False,
        ),
    ] = None,
    group_size: Annotated[
        int | None,
        typer.Option(
            "--group-size",
            "-g",
            metavar="N",
            help="Rollouts per group: groups draws N of each pool (default: the whole "
            f"pool); balanced takes N, even (default {DEFAULT_BALANCED_SIZE}).",
            show_default=False,
            rich_help_panel=GROUPS,
        ),
    ] = None,
    weights: Annotated[
        Objective,
        typer.Option(
            metavar="OBJ",
            help="The objective whose weight w = f'(p) each group carries (as `curate "
            "filter --weights`): linear, log (Reinforce-Ada), sqrt, arcsin (GRPO's "
            "standardisation).",
            rich_help_panel=GROUPS,
        ),
    ] = DEFAULT_WEIGHTS,
    weight_delta: Annotated[
        float,
        typer.Option(
            metavar="D",
            help="Clip the smoothed pass rate to [D, 1-D] before weighting.",
            rich_help_panel=GROUPS,
        ),
    ] = DEFAULT_DELTA,
    seed: Annotated[
        int, typer.Option(metavar="S", help="Seed of every draw (the same seed, the same rows).")
    ] = DEFAULT_SEED,
) -> None:
    """Write a run's rollouts as training data: rejection-sampling SFT, DPO pairs,
    or offline GRPO groups (whole, or balanced with their correction).

    Error rows never appear; a rollout cut short is never an SFT target or a
    chosen or rejected response (it stays in groups, with its reward).
    """
    from curate.exports.rollouts import RolloutExportRequest, export_rollouts

    result = export_rollouts(
        RolloutExportRequest(
            run,
            output,
            kind.value,
            style=style.value if style is not None else None,  # type: ignore[arg-type]
            reasoning=reasoning.value,  # type: ignore[arg-type]
            per_prompt=per_prompt,
            group_size=group_size,
            objective=weights.value,
            delta=weight_delta,
            seed=seed,
        )
    )
    print(
        f"exported {result.rows} {result.kind} rows from {result.prompts} of "
        f"{result.pools} prompts ({result.style}) -> {result.path}"
    )
    for what, count in result.left_out.items():
        print(f"  left out {count} {what}")
