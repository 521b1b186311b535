"""Grader options that `curate eval` and `curate grade` share: worker processes, the
code grader's scoring, the reward model's server and the LLM judge's settings, as one
option group (`GraderFlags`, read by `curate.cli.groups.grouped`), and the one place
that turns them, with `-O KIND.NAME=VALUE` pairs, into the grader kinds' own options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from curate.cli.judge_options import (
    JudgeBaseUrlOpt,
    JudgeConcurrencyOpt,
    JudgeKeyEnvOpt,
    JudgeMaxTokensOpt,
    JudgeModelOpt,
    JudgePriceOpt,
    RubricOpt,
    judge_config,
)
from curate.errors import UsageError

if TYPE_CHECKING:
    from curate.core.options import OptionSchema
    from curate.graders.judge import JudgeConfig
    from curate.graders.reward_model import RewardModelConfig

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


def split_assignments(pairs: Sequence[str]) -> tuple[list[str], list[str]]:
    """`--option` pairs as (the backend's, the grader kinds'): a grader kind's option is
    written with the kind before a dot (`judge.timeout=30`), a backend's without."""
    backend: list[str] = []
    grader: list[str] = []
    for pair in pairs:
        (grader if "." in pair.partition("=")[0] else backend).append(pair)
    return backend, grader


@dataclass(frozen=True)
class KindOptions:
    """The grader kinds' own options, from their flags and `-O KIND.NAME=VALUE`."""

    judge: JudgeConfig | None = None
    reward_model: RewardModelConfig | None = None
    other: OptionSchema | None = None  # another kind's (a plugin's schema)


@dataclass(frozen=True)
class GraderFlags:
    """The grading flags `curate eval` and `curate grade` share (one option group)."""

    grader_workers: GraderWorkersOpt = None
    code_score: CodeScoreOpt = None
    reward_base_url: RewardBaseUrlOpt = None
    reward_model: RewardModelOpt = None
    reward_api_key_env: RewardKeyEnvOpt = None
    reward_endpoint: RewardEndpointOpt = "auto"
    judge_model: JudgeModelOpt = None
    judge_base_url: JudgeBaseUrlOpt = None
    judge_api_key_env: JudgeKeyEnvOpt = None
    rubric: RubricOpt = None
    judge_price: JudgePriceOpt = None
    judge_concurrency: JudgeConcurrencyOpt = None
    judge_max_tokens: JudgeMaxTokensOpt = None

    def kind_options(self, assignments: Sequence[str] = ()) -> KindOptions:
        """The judge's and the reward model's settings from their flags, with the
        `-O KIND.NAME=VALUE` pairs (`assignments`) laid over the kind they name, each
        validated once by its kind's schema; UsageError naming an unknown kind or
        option (with the ones that exist), or one set both ways."""
        from curate.graders.registry import grader_kind, grader_options

        judge = judge_config(
            self.judge_model,
            self.judge_base_url,
            self.judge_api_key_env,
            self.rubric,
            self.judge_price,
            self.judge_concurrency,
            self.judge_max_tokens,
        )
        reward = reward_model_config(
            self.reward_base_url, self.reward_model, self.reward_api_key_env, self.reward_endpoint
        )
        by_kind: dict[str, list[str]] = {}
        for pair in assignments:
            kind = grader_kind(pair.partition("=")[0].partition(".")[0])
            by_kind.setdefault(kind, []).append(pair)
        other: OptionSchema | None = None
        for kind, pairs in by_kind.items():
            if kind == "judge":
                judge = grader_options(kind, pairs, judge)  # type: ignore[assignment]
            elif kind == "reward-model":
                reward = grader_options(kind, pairs, reward)
            elif other is None:
                other = grader_options(kind, pairs)
            else:
                raise UsageError(
                    f"--option {pairs[0].partition('=')[0]}: options of two grader kinds "
                    f"({', '.join(by_kind)}); a run has one grader"
                )
        return KindOptions(judge=judge, reward_model=reward, other=other)
