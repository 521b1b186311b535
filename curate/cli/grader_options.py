"""Grader options that `curate eval` and `curate grade` share (Annotated aliases, typer
style): worker processes, the code grader's scoring, the reward model's server."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from curate.errors import UsageError

GRADING = "Grading"

GraderWorkersOpt = Annotated[
    int | None,
    typer.Option(
        metavar="N",
        help="Worker processes of the graders that use them (math, python:, verl, "
        "trl:), or programs run at once by --grader code (default: min(4, CPUs)).",
        show_default=False,
        rich_help_panel=GRADING,
    ),
]
CodeScoreOpt = Annotated[
    str | None,
    typer.Option(
        metavar="MODE",
        help="--grader code: 1 when every test passes (all, the default), or the "
        "share of tests passed (fraction).",
        show_default=False,
        rich_help_panel=GRADING,
    ),
]
RewardBaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        metavar="URL",
        help="--grader reward-model: the server of a sequence-classification reward "
        "model, e.g. http://127.0.0.1:8001 (vLLM with --runner pooling).",
        show_default=False,
        rich_help_panel=GRADING,
    ),
]
RewardModelOpt = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="--grader reward-model: the served model's name. \\[default: the server's only model]",
        show_default=False,
        rich_help_panel=GRADING,
    ),
]
RewardKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        metavar="VAR",
        help="--grader reward-model: the environment variable holding the server's "
        "API key (never the key itself).",
        show_default=False,
        rich_help_panel=GRADING,
    ),
]
RewardEndpointOpt = Annotated[
    str,
    typer.Option(
        metavar="NAME",
        help="--grader reward-model: the endpoint to call, auto, classify, pooling or "
        "score; auto tries /classify, /pooling, /score in turn with one probe.",
        rich_help_panel=GRADING,
    ),
]


def reward_model_config(
    base_url: str | None, model: str | None, key_env: str | None, endpoint: str
) -> Any:
    """The reward model's server from the --reward-* options (None without a URL);
    UsageError for the other options given without --reward-base-url."""
    if base_url is None:
        given = [
            flag
            for flag, value in (
                ("--reward-model", model),
                ("--reward-api-key-env", key_env),
                ("--reward-endpoint", None if endpoint == "auto" else endpoint),
            )
            if value is not None
        ]
        if given:
            raise UsageError(f"{given[0]} needs --reward-base-url (and --grader reward-model)")
        return None
    from curate.graders.reward_model import RewardModelConfig

    return RewardModelConfig(
        base_url=base_url, model=model, api_key_env=key_env, endpoint=endpoint.lower()
    )
