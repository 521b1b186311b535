"""`curate grade`: score a run's stored completions again with another grader."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from curate.cli.errors import handle_errors
from curate.cli.grader_options import (
    CodeScoreOpt,
    GraderWorkersOpt,
    RewardBaseUrlOpt,
    RewardEndpointOpt,
    RewardKeyEnvOpt,
    RewardModelOpt,
    reward_model_config,
)
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


@handle_errors
def grade_cmd(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run directory written by `curate eval`.", metavar="RUN", show_default=False
        ),
    ],
    grader: Annotated[
        str,
        typer.Option(
            "--grader",
            help="The grader to score the completions with (the specs of `curate eval "
            "--grader`, judge included).",
            metavar="SPEC",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="The new run directory (same rollouts, new scores).",
            metavar="DIR",
            show_default=False,
        ),
    ],
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace --out even when it holds another run."),
    ] = False,
    grader_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Deadline per call of graders that run in worker processes.",
        ),
    ] = 10.0,
    score_range: Annotated[
        str | None,
        typer.Option(
            metavar="LO:HI",
            help="The range of a continuous reward (python:, verl, trl:).",
            show_default=False,
        ),
    ] = None,
    grader_workers: GraderWorkersOpt = None,
    code_score: CodeScoreOpt = None,
    reward_base_url: RewardBaseUrlOpt = None,
    reward_model: RewardModelOpt = None,
    reward_api_key_env: RewardKeyEnvOpt = None,
    reward_endpoint: RewardEndpointOpt = "auto",
    judge_model: JudgeModelOpt = None,
    judge_base_url: JudgeBaseUrlOpt = None,
    judge_api_key_env: JudgeKeyEnvOpt = None,
    rubric: RubricOpt = None,
    judge_price: JudgePriceOpt = None,
    judge_concurrency: JudgeConcurrencyOpt = None,
    judge_max_tokens: JudgeMaxTokensOpt = None,
) -> None:
    """Score a run's stored completions with another grader into a new run (no model)."""
    from curate.engine.preflight import check_grader_options, fold_code_score, parse_score_range
    from curate.engine.progress import error_summary
    from curate.engine.regrade import RegradeOptions, regrade

    check_grader_options(
        grader,
        grader_timeout=grader_timeout,
        grader_workers=grader_workers,
        code_score=code_score,
    )
    spec = fold_code_score(grader, code_score)
    assert spec is not None
    opts = RegradeOptions(
        source=run,
        out=out,
        grader=spec,
        workers=grader_workers,
        reward_model=reward_model_config(
            reward_base_url, reward_model, reward_api_key_env, reward_endpoint
        ),
        grader_timeout=grader_timeout,
        score_range=parse_score_range(score_range) if score_range is not None else None,
        judge=judge_config(
            judge_model,
            judge_base_url,
            judge_api_key_env,
            rubric,
            judge_price,
            judge_concurrency,
            judge_max_tokens,
        ),
        force=force,
    )
    result = regrade(opts)
    print(
        f"{result.out}: {result.rollouts} rollouts from {run}, {result.graded} graded with "
        f"{spec} in {result.seconds:.1f}s; {result.grader_errors} grader errors, "
        f"{result.generation_errors} generation errors kept"
    )
    from collections import Counter

    for line in error_summary(Counter(result.error_messages)):
        print(line)
    if result.judge_usage is not None:
        from curate.graders.judge import JudgeUsage

        usage = JudgeUsage(
            **{k: v for k, v in result.judge_usage.items() if k != "cost_usd"},
            price_per_mtok=opts.judge.price_per_mtok if opts.judge else None,
        )
        print(usage.line())
    print(f"next: curate agree {run} {result.out}")
