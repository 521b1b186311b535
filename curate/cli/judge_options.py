"""The LLM judge's options, shared by `curate eval` and `curate grade`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from curate.remote import settings as remote_settings

if TYPE_CHECKING:
    from curate.graders.judge import JudgeConfig

JUDGE = "LLM judge (--grader judge)"

JudgeModelOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        help="The judge's model name at the endpoint (needed by --grader judge).",
        metavar="NAME",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]
JudgeBaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-base-url",
        help="The judge's OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 "
        "\\[default: $OPENAI_BASE_URL]",
        metavar="URL",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]
JudgeKeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-api-key-env",
        help="The NAME of the environment variable holding the judge's key (never the "
        f"key itself). \\[default: {remote_settings.JUDGE.api_key_env}]",
        metavar="VAR",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]
RubricOpt = Annotated[
    Path | None,
    typer.Option(
        "--rubric",
        help="A rubric file with {prompt}, {completion} and {reference}; the judge must "
        'end with \'SCORE: x/y\' or {"score": x, "max": y}. \\[default: built in]',
        metavar="PATH",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]
JudgePriceOpt = Annotated[
    float | None,
    typer.Option(
        "--judge-price",
        help="USD per million judge tokens (prompt and completion), for the cost line.",
        metavar="USD",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]
JudgeConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--judge-concurrency",
        help=f"Judge requests in flight at once. \\[default: {remote_settings.JUDGE.concurrency}]",
        metavar="N",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]

JudgeMaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--judge-max-tokens",
        help="The judge's answer length limit in tokens. "
        f"\\[default: {remote_settings.JUDGE_MAX_TOKENS}]",
        metavar="N",
        show_default=False,
        rich_help_panel=JUDGE,
    ),
]


def judge_config(
    model: str | None,
    base_url: str | None,
    key_env: str | None,
    rubric: Path | None,
    price: float | None,
    concurrency: int | None,
    max_tokens: int | None = None,
) -> JudgeConfig | None:
    """The judge's settings from the flags (None when no judge option is given); a judge
    option without --judge-model is a usage error."""
    from curate.errors import UsageError
    from curate.graders.judge import JudgeConfig

    given = {
        "--judge-base-url": base_url,
        "--judge-api-key-env": key_env,
        "--rubric": rubric,
        "--judge-price": price,
        "--judge-concurrency": concurrency,
        "--judge-max-tokens": max_tokens,
    }
    if model is None:
        named = [name for name, value in given.items() if value is not None]
        if named:
            raise UsageError(f"{', '.join(named)} need --judge-model (and --grader judge)")
        return None
    # Options not given keep the config's declared defaults.
    chosen = {
        "api_key_env": key_env,
        "concurrency": concurrency,
        "max_tokens": max_tokens,
    }
    config = JudgeConfig(
        model=model,
        base_url=base_url,
        rubric_path=rubric,
        price_per_mtok=price,
        **{name: value for name, value in chosen.items() if value is not None},  # type: ignore[arg-type]
    )
    from curate.graders.judge import load_rubric

    load_rubric(config.rubric_path)  # a bad rubric fails now, with its option named
    return config
