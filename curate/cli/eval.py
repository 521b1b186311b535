"""`curate eval`: N graded rollouts per sample, stored in a resumable run directory."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from curate.backends.openai_options import OpenAIOptions
from curate.backends.options import BackendOptions, flag_name
from curate.backends.registry import options_schema
from curate.backends.vllm_options import VllmOptions
from curate.cli.errors import debug_enabled, handle_errors
from curate.cli.grader_options import GraderFlags, split_assignments
from curate.cli.groups import grouped
from curate.cli.judge_options import JUDGE
from curate.core.reasoning import DEFAULT_TRUNCATION
from curate.core.sampling import DEFAULT_SAMPLING
from curate.errors import UsageError
from curate.evaluation.spec import DEFAULT_CHUNK_SIZE, DEFAULT_ROLLOUTS
from curate.graders.base import DEFAULT_TIMEOUT_S
from curate.graders.checks import DEFAULT_MAX_BAD_FRACTION

if TYPE_CHECKING:
    from curate.core.shards import ShardSpec
    from curate.evaluation import adaptive as _adaptive
    from curate.evaluation.options import EvalOptions
    from curate.evaluation.preflight import Preflight

# The backends with flags on `curate eval`, by their --backend name.
FLAG_SCHEMAS: dict[str, type[BackendOptions]] = {"vllm": VllmOptions, "openai": OpenAIOptions}


# Help panels of `curate eval`, in the order they print (after Arguments and Options);
# the backends' panels come from their schemas.
PROMPTS = "Data and prompts"
SAMPLING = "Sampling"
GRADING = "Grading"
RUN = "Run directory and output"
ADAPTIVE = "Adaptive evaluation"
DEEPEN = "Deepening a finished run"
# The order the panels print in (typer: the order of their first option), kept when
# the options are grouped by what they do.
PANELS = (
    None,
    GRADING,
    PROMPTS,
    RUN,
    SAMPLING,
    VllmOptions.panel,
    OpenAIOptions.panel,
    ADAPTIVE,
    DEEPEN,
    JUDGE,
)


def _flag(schema: type[BackendOptions], name: str) -> Any:
    """A typer option for one schema field: its help, range and help panel. A boolean
    that defaults to False gets no --no-X twin (it would only widen the help)."""
    field = schema._field(name)
    help = schema.flag_help(name)
    if schema.panel and help.startswith(f"{schema.label}: "):
        help = help[len(schema.label) + 2 :]  # the panel's title names the backend
    decls = [flag_name(name)] if field.default is False else []
    return typer.Option(
        *decls,
        help=help,
        show_default=schema.flag_default(name) is not None and field.default is not False,
        rich_help_panel=schema.panel,
        metavar=_metavar(field.type),
        **schema.flag_range(name),
    )


def _metavar(annotation: object) -> str | None:
    """A short metavar for a schema field's type ('N', 'X', 'TEXT'); None for a flag."""
    text = str(annotation)
    if text.startswith("bool"):
        return None
    if text.startswith("int"):
        return "N"
    if text.startswith("float"):
        return "X"
    return "TEXT"


class ModeChoice(StrEnum):
    chat = "chat"
    completion = "completion"


@dataclass(frozen=True)
class PromptFlags:
    """The data set's layout and how prompts are built from it."""

    layout: Annotated[
        str,
        typer.Option(
            help="The data set's layout: auto (recognised from the field names and "
            "types), none (generic field names), or a name from `curate layouts` "
            "(mmlu, arc, gpqa, gsm8k, math, humaneval, chat, verl, ...).",
            metavar="NAME",
            rich_help_panel=PROMPTS,
        ),
    ] = "auto"
    mode: Annotated[
        ModeChoice | None,
        typer.Option(
            help="chat: apply the chat template; completion: raw text. "
            "\\[default: chat if the model has one]",
            metavar="MODE",
            show_default=False,
            rich_help_panel=PROMPTS,
        ),
    ] = None
    system: Annotated[
        str | None,
        typer.Option(help="System prompt.", metavar="TEXT", rich_help_panel=PROMPTS),
    ] = None
    template: Annotated[
        str | None,
        typer.Option(
            help="Prompt template over the fields, e.g. 'Q: {question}\\nA:' or "
            "'{choices.text[0]}'.",
            metavar="TEXT",
            rich_help_panel=PROMPTS,
        ),
    ] = None
    prompt_field: Annotated[
        str | None,
        typer.Option(
            help="Prompt column. \\[default: the layout's, else found by name]",
            metavar="COL",
            rich_help_panel=PROMPTS,
        ),
    ] = None
    answer_field: Annotated[
        str | None,
        typer.Option(
            help="Reference answer column, or STRUCT.FIELD. \\[default: the layout's, "
            "else found by name]",
            metavar="COL",
            rich_help_panel=PROMPTS,
        ),
    ] = None
    id_field: Annotated[
        str | None,
        typer.Option(
            help="Id column. \\[default: the layout's, else id or sample_id, else a content hash]",
            metavar="COL",
            rich_help_panel=PROMPTS,
        ),
    ] = None
    limit: Annotated[
        int | None,
        typer.Option(min=1, help="Only the first K samples.", metavar="K", rich_help_panel=PROMPTS),
    ] = None
    split: Annotated[
        str | None,
        typer.Option(
            help="Split of a saved DatasetDict or shard directory, e.g. train.",
            metavar="NAME",
            show_default=False,
            rich_help_panel=PROMPTS,
        ),
    ] = None

    def options(self) -> dict[str, Any]:
        """The `EvalOptions` fields of this group."""
        return {
            "layout": self.layout,
            "mode": self.mode.value if self.mode else None,
            "system": self.system,
            "template": self.template,
            "prompt_field": self.prompt_field,
            "answer_field": self.answer_field,
            "id_field": self.id_field,
            "limit": self.limit,
            "split": self.split,
        }


@dataclass(frozen=True)
class SamplingFlags:
    """How each rollout is sampled."""

    temperature: Annotated[float, typer.Option(min=0.0, metavar="X", rich_help_panel=SAMPLING)] = (
        DEFAULT_SAMPLING.temperature
    )
    top_p: Annotated[
        float, typer.Option(min=0.0, max=1.0, metavar="X", rich_help_panel=SAMPLING)
    ] = DEFAULT_SAMPLING.top_p
    max_tokens: Annotated[
        int,
        typer.Option(
            min=1, help="Completion tokens per rollout.", metavar="N", rich_help_panel=SAMPLING
        ),
    ] = DEFAULT_SAMPLING.max_tokens
    logprobs: Annotated[
        int | None,
        typer.Option(
            help="Store token confidence: the top K log-probabilities of each sampled "
            "token, summarised per rollout (mean log-probability, entropy, DeepConf's "
            "lowest group and tail confidence; `curate report` measures them against "
            "the grade). K from 1 to 19.",
            metavar="K",
            show_default=False,
            rich_help_panel=SAMPLING,
        ),
    ] = None
    confidence_window: Annotated[
        int | None,
        typer.Option(
            help="Tokens per group of the group and tail confidence (with --logprobs). "
            "\\[default: 64]",
            metavar="N",
            show_default=False,
            rich_help_panel=SAMPLING,
        ),
    ] = None
    keep_token_logprobs: Annotated[
        bool,
        typer.Option(
            "--keep-token-logprobs",
            help="Also store the per-token log-probability arrays (with --logprobs; "
            "large: for small runs).",
            rich_help_panel=SAMPLING,
        ),
    ] = False
    stop: Annotated[
        list[str] | None,
        typer.Option(
            help="Stop string (repeatable).",
            metavar="TEXT",
            show_default=False,
            rich_help_panel=SAMPLING,
        ),
    ] = None
    seed: Annotated[
        int,
        typer.Option(
            help="Base seed; each rollout's seed derives from it.",
            metavar="N",
            rich_help_panel=SAMPLING,
        ),
    ] = 0

    def options(self) -> dict[str, Any]:
        """The `EvalOptions` fields of this group."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": tuple(self.stop or ()),
            "logprobs": self.logprobs,
            "confidence_window": self.confidence_window,
            "keep_token_logprobs": self.keep_token_logprobs,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class GradingFlags:
    """How references are read and checked, and how rollouts are scored (the
    flags `curate grade` shares are `GraderFlags`)."""

    grader: Annotated[
        str | None,
        typer.Option(
            help="exact, numeric, math, choice, code, regex:PATTERN, python:FILE.py:FUNC, "
            "verl[:FILE.py:FUNC], trl:FILE.py:FUNC, reward-model (--reward-base-url) or "
            "judge (an LLM, --judge-model). \\[default: the layout's grader, else "
            "chosen from the references: numeric, choice, math or exact]",
            metavar="SPEC",
            show_default=False,
            rich_help_panel=GRADING,
        ),
    ] = None
    reference_extract: Annotated[
        str,
        typer.Option(
            help="How to read each reference's answer: auto, gsm8k ('#### N'), boxed "
            "(last \\boxed{}), answer-is ('The answer is X'), last-number, or none (as "
            "given). auto picks the form most references have. \\[default: auto]",
            metavar="MODE",
            show_default=False,
            rich_help_panel=GRADING,
        ),
    ] = "auto"
    max_bad_references: Annotated[
        float,
        typer.Option(
            help="Refuse to start when the grader cannot use more than this share of the "
            "references (checked before the engine starts).",
            metavar="X",
            rich_help_panel=GRADING,
        ),
    ] = DEFAULT_MAX_BAD_FRACTION
    grader_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            help="Deadline per call of graders that run in worker processes (math, "
            "python:, verl, trl:); a call past it is an error row. For --grader code: "
            "the wall clock of each test case (a case past it is a timeout).",
            rich_help_panel=GRADING,
        ),
    ] = DEFAULT_TIMEOUT_S
    score_range: Annotated[
        str | None,
        typer.Option(
            metavar="LO:HI",
            help="The range of a continuous reward (python:, verl, trl:, reward-model), "
            "e.g. -1:1: scores are mapped to [0, 1], the raw value kept in raw_score.",
            show_default=False,
            rich_help_panel=GRADING,
        ),
    ] = None
    truncated: Annotated[
        str,
        typer.Option(
            "--truncated",
            metavar="POLICY",
            help="A rollout cut short (max_tokens, or reasoning never closed): grade "
            "(as it stands, as verl and TRL do), wrong (score 0), error (an error row) "
            "or exclude (out of every statistic, DAPO's overlong filtering).",
            rich_help_panel=GRADING,
        ),
    ] = DEFAULT_TRUNCATION
    no_context_check: Annotated[
        bool,
        typer.Option(
            "--no-context-check",
            help="Start even when the longest prompt plus --max-tokens exceeds the "
            "model's context window (checked before anything starts).",
            rich_help_panel=RUN,
        ),
    ] = False

    def options(self) -> dict[str, Any]:
        """The `EvalOptions` fields of this group (the score range read and checked)."""
        from curate.evaluation.preflight import parse_score_range

        score_range = self.score_range
        return {
            "grader": self.grader,
            "reference_extract": self.reference_extract,
            "max_bad_references": self.max_bad_references,
            "grader_timeout": self.grader_timeout,
            "score_range": parse_score_range(score_range) if score_range is not None else None,
            "truncation": self.truncated,
            "context_check": not self.no_context_check,
        }


@dataclass(frozen=True)
class BackendFlags:
    """The backends' flags: help, range and default come from their option schemas
    (the openai ones default to None: only typed options reach the manifest)."""

    tensor_parallel_size: Annotated[int, _flag(VllmOptions, "tensor_parallel_size")] = (
        VllmOptions.flag_default("tensor_parallel_size")
    )
    max_model_len: Annotated[int | None, _flag(VllmOptions, "max_model_len")] = (
        VllmOptions.flag_default("max_model_len")
    )
    gpu_memory_utilization: Annotated[
        float | None, _flag(VllmOptions, "gpu_memory_utilization")
    ] = VllmOptions.flag_default("gpu_memory_utilization")
    kv_cache_memory_gb: Annotated[float | None, _flag(VllmOptions, "kv_cache_memory_gb")] = (
        VllmOptions.flag_default("kv_cache_memory_gb")
    )
    dtype: Annotated[str, _flag(VllmOptions, "dtype")] = VllmOptions.flag_default("dtype")
    trust_remote_code: Annotated[bool, _flag(VllmOptions, "trust_remote_code")] = (
        VllmOptions.flag_default("trust_remote_code")
    )
    ray: Annotated[str | None, _flag(VllmOptions, "ray")] = VllmOptions.flag_default("ray")
    replicas: Annotated[int, _flag(VllmOptions, "replicas")] = VllmOptions.flag_default("replicas")
    gpus_per_replica: Annotated[float | None, _flag(VllmOptions, "gpus_per_replica")] = (
        VllmOptions.flag_default("gpus_per_replica")
    )
    cpus_per_replica: Annotated[float | None, _flag(VllmOptions, "cpus_per_replica")] = (
        VllmOptions.flag_default("cpus_per_replica")
    )
    reasoning_parser: Annotated[str | None, _flag(VllmOptions, "reasoning_parser")] = (
        VllmOptions.flag_default("reasoning_parser")
    )
    base_url: Annotated[list[str] | None, _flag(OpenAIOptions, "base_url")] = None
    api_key_env: Annotated[str | None, _flag(OpenAIOptions, "api_key_env")] = None
    concurrency: Annotated[int | None, _flag(OpenAIOptions, "concurrency")] = None
    requests_per_minute: Annotated[float | None, _flag(OpenAIOptions, "requests_per_minute")] = None
    tokens_per_minute: Annotated[float | None, _flag(OpenAIOptions, "tokens_per_minute")] = None
    timeout: Annotated[float | None, _flag(OpenAIOptions, "timeout")] = None
    max_retries: Annotated[int | None, _flag(OpenAIOptions, "max_retries")] = None


@dataclass(frozen=True)
class ResumeFlags:
    """The run directory: what a resume does with what it finds."""

    force_new: Annotated[
        bool,
        typer.Option(
            "--force-new",
            help="Discard a run directory made with other settings.",
            rich_help_panel=RUN,
        ),
    ] = False
    set_aside_corrupt: Annotated[
        bool,
        typer.Option(
            "--set-aside-corrupt",
            help="Move unreadable shards to RUN/rollouts/corrupt/ and redo their rollouts.",
            rich_help_panel=RUN,
        ),
    ] = False
    chunk_size: Annotated[
        int,
        typer.Option(
            min=1,
            help="Prompts per engine call and per shard.",
            metavar="N",
            rich_help_panel=RUN,
        ),
    ] = DEFAULT_CHUNK_SIZE

    def options(self) -> dict[str, Any]:
        """The `EvalOptions` fields of this group."""
        return {
            "force_new": self.force_new,
            "set_aside_corrupt": self.set_aside_corrupt,
            "chunk_size": self.chunk_size,
        }


@dataclass(frozen=True)
class ShardFlags:
    """This process's share of an array job."""

    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="I/K",
            help="Evaluate shard I of K (0 <= I < K): the samples whose sha256(sample_id) mod "
            "K is I. K array-job tasks may write one run directory at once.",
            show_default=False,
            rich_help_panel=RUN,
        ),
    ] = None


@dataclass(frozen=True)
class OutputFlags:
    """What the command prints, and --dry-run's estimate."""

    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Count the rollouts to do and estimate tokens and cost; start no "
            "model, send no request.",
        ),
    ] = False
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No progress or status lines.", rich_help_panel=RUN),
    ] = False
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show the engine's own output instead of writing it to RUN/engine.log.",
            rich_help_panel=RUN,
        ),
    ] = False
    price_in: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="USD per million prompt tokens, for --dry-run.",
            metavar="USD",
            show_default=False,
            rich_help_panel=RUN,
        ),
    ] = None
    price_out: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="USD per million completion tokens, for --dry-run.",
            metavar="USD",
            show_default=False,
            rich_help_panel=RUN,
        ),
    ] = None


@dataclass(frozen=True)
class AdaptiveFlags:
    """Adaptive evaluation and deepening a finished run."""

    adaptive: Annotated[
        bool,
        typer.Option(
            "--adaptive",
            help="Draw in rounds: a sample stops once its outcomes are mixed; "
            "all-same samples draw up to --max-rollouts.",
            rich_help_panel=ADAPTIVE,
        ),
    ] = False
    round_size: Annotated[
        int | None,
        typer.Option(
            help="Rollouts per open sample per round. \\[default: 1; 2 for an untouched sample]",
            metavar="N",
            show_default=False,
            rich_help_panel=ADAPTIVE,
        ),
    ] = None
    max_rollouts: Annotated[
        int | None,
        typer.Option(
            "--max-rollouts",
            help="Most rollouts per sample. \\[default: --rollouts; no cap with --budget]",
            metavar="N",
            show_default=False,
            rich_help_panel=ADAPTIVE,
        ),
    ] = None
    budget: Annotated[
        int | None,
        typer.Option(
            help="Total rollouts for the run; when it binds, draws go to the all-same "
            "samples most likely to open.",
            metavar="N",
            show_default=False,
            rich_help_panel=ADAPTIVE,
        ),
    ] = None
    balanced: Annotated[
        int | None,
        typer.Option(
            help="Stop a sample at K passes and K failures instead of at mixed.",
            metavar="K",
            show_default=False,
            rich_help_panel=ADAPTIVE,
        ),
    ] = None
    deepen: Annotated[
        int | None,
        typer.Option(
            help="Resume a finished fixed-N run and deepen K of its prompts drawn at "
            "random (seeded by --seed) among those always incorrect or always correct "
            "in their first N rollouts: pins the tails when the multiplier is undecided.",
            metavar="K",
            show_default=False,
            rich_help_panel=DEEPEN,
        ),
    ] = None
    to: Annotated[
        int | None,
        typer.Option(
            "--to",
            help="Rollouts each deepened prompt ends with (more than -n).",
            metavar="M",
            show_default=False,
            rich_help_panel=DEEPEN,
        ),
    ] = None
    deepen_stratum: Annotated[
        str | None,
        typer.Option(
            help="both (K split between the always-incorrect and always-correct prompts "
            "in proportion to their numbers), incorrect or correct. \\[default: both]",
            metavar="WHICH",
            show_default=False,
            rich_help_panel=DEEPEN,
        ),
    ] = None

    def options(self) -> dict[str, Any]:
        """The `EvalOptions` fields of this group."""
        return {
            "adaptive": self.adaptive,
            "round_size": self.round_size,
            "max_runs": self.max_rollouts,
            "budget": self.budget,
            "balanced": self.balanced,
            "deepen": self.deepen,
            "deepen_to": self.to,
            "deepen_stratum": self.deepen_stratum,
        }


@handle_errors
@grouped(panels=PANELS)
def eval_cmd(
    ctx: typer.Context,
    data: Annotated[
        Path,
        typer.Argument(
            help="Samples: JSONL, Parquet, CSV, a saved Hugging Face dataset, or a "
            "directory of Parquet shards.",
            metavar="DATA",
            show_default=False,
        ),
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Local model directory, or a Hugging Face name (vllm); the served "
            "model's name (openai).",
            metavar="MODEL",
            show_default=False,
        ),
    ],
    *,
    backend: Annotated[
        str, typer.Option(help="vllm (local engine) or openai (an endpoint).", metavar="NAME")
    ] = "vllm",
    rollouts: Annotated[
        int, typer.Option("--rollouts", "-n", min=1, help="Rollouts per sample.", metavar="N")
    ] = DEFAULT_ROLLOUTS,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Run directory; the same command resumes it. "
            "\\[default: runs/DATA__MODEL, e.g. runs/arithmetic__tiny-math]",
            metavar="DIR",
            show_default=False,
        ),
    ] = None,
    grading: GradingFlags,
    grader_flags: GraderFlags,
    prompts: PromptFlags,
    sampling: SamplingFlags,
    engine: BackendFlags,
    resume: ResumeFlags,
    sharding: ShardFlags,
    output: OutputFlags,
    rounds: AdaptiveFlags,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            "-O",
            help="Any option of the --backend's schema, flag or not (say transport=httpx "
            "for openai, or a plugin backend's own), or of the grader's as KIND.NAME "
            "(say judge.timeout=60); repeatable. An unknown NAME is refused with the "
            "closest names.",
            metavar="NAME=VALUE",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run N rollouts per sample, grade them, and store every rollout (resumable)."""
    from curate.evaluation.adaptive import AdaptiveResult
    from curate.evaluation.evaluate import evaluate
    from curate.evaluation.options import EvalOptions
    from curate.evaluation.progress import error_summary, make_progress
    from curate.evaluation.r3 import prefill_line

    backend_pairs, grader_pairs = split_assignments(option or ())
    own = grader_flags.kind_options(grader_pairs)
    opts = EvalOptions(
        data=data,
        model=model,
        backend=backend,
        runs=rollouts,
        out=out,
        **prompts.options(),
        **sampling.options(),
        **grading.options(),
        grader_workers=grader_flags.grader_workers,
        code_score=grader_flags.code_score,
        judge=own.judge,
        reward_model=own.reward_model,
        grader_options=own.other,
        engine_options=backend_flags(
            backend, asdict(engine), backend_pairs, typed=_typed(ctx, ctx.params)
        ),
        **resume.options(),
        shard=parse_shard_option(sharding.shard),
        engine_log=not output.verbose,
        **rounds.options(),
    )
    if output.dry_run:
        if rounds.deepen is not None:
            raise UsageError(
                "--dry-run does not combine with --deepen: a deepen draws at most "
                "K x (M - N) rollouts, M given by --to and N the run's -n"
            )
        _print_dry_run(opts, output.price_in, output.price_out, quiet=output.quiet)
        return
    if backend == "openai":
        _log_to_stderr("curate.backends.openai_api")
    # --quiet: nothing on stderr but errors (the start lines included).
    announce = None if output.quiet else _print_start
    try:
        outcome = evaluate(
            opts,
            progress=make_progress(output.quiet),
            announce=announce,
            status=None if output.quiet else _status,
        )
    except Exception as exc:
        _show_engine_log(opts, exc)
        raise
    r = outcome.result
    if outcome.set_aside:
        where = outcome.set_aside[0].parent
        print(
            f"{outcome.run_dir}: set aside {len(outcome.set_aside)} unreadable shard(s) in {where}"
        )
    label = f"{outcome.run_dir}" + (f" (shard {opts.shard})" if opts.shard else "")
    settled = f" ({r.settled} settled: they recur, a re-run keeps them)" if r.settled else ""
    print(
        f"{label}: {r.rollouts} new rollouts in {r.seconds:.1f}s "
        f"({r.skipped} already stored), {r.errors} errors{settled}, {r.truncated} truncated"
    )
    for line in error_summary(r.error_messages):
        print(line)
    if r.prefills:
        print(prefill_line(r.prefills, r.prefill_tokens, r.prefill_seconds))
    if outcome.judge_usage is not None:
        print(usage_line(r.prompt_tokens, r.completion_tokens, outcome.judge_usage))
    if isinstance(r, AdaptiveResult):
        print(adaptive_line(r))
    if outcome.deepen is not None:
        print(outcome.deepen.line())
    if outcome.all_failed:
        # Nothing was learned: say so and fail. Retryable errors are redone on a re-run;
        # settled ones are not, so a re-run of such a run fails the same way.
        tally = outcome.tally
        if tally is not None and tally.never_scored:
            what = (
                f"none of the {tally.expected} rollouts can be scored: "
                f"{tally.settled} are errors that recur on a re-run"
            )
        else:
            what = f"all {r.rollouts} rollouts failed"
        print(f"{outcome.run_dir}: {what}; see their errors: curate report {outcome.run_dir}")
        raise typer.Exit(1)
    if opts.shard is not None:
        print(f"next: curate status {outcome.run_dir} (then curate report {outcome.run_dir})")
    else:
        print(f"next: curate report {outcome.run_dir}")


def parse_shard_option(text: str | None) -> ShardSpec | None:
    """--shard I/K, or a one-line UsageError (exit 2, before anything is written)."""
    from curate.core.shards import parse_shard

    if text is None:
        return None
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise UsageError(f"--shard: {exc}") from None


def usage_line(prompt_tokens: int, completion_tokens: int, judge: Mapping[str, Any]) -> str:
    """Policy and judge tokens side by side (this call's), with the judge's cost if priced."""
    line = (
        f"tokens: policy {prompt_tokens:,} prompt + {completion_tokens:,} completion; "
        f"judge {judge['prompt_tokens']:,} prompt + {judge['completion_tokens']:,} "
        f"completion ({judge['calls']} calls, {judge['cached']} cached)"
    )
    if judge.get("cost_usd") is not None:
        line += f", judge cost ${judge['cost_usd']:.4f}"
    return line


def _status(line: str) -> None:
    """A status line on stderr, beside the progress lines."""
    import sys

    print(f"eval: {line}", file=sys.stderr, flush=True)


def _show_engine_log(opts: EvalOptions, exc: BaseException) -> None:
    """With CURATE_DEBUG, the last lines of the engine log a failure points to."""
    import sys

    from curate.backends.engine_output import log_tail
    from curate.evaluation.options import engine_log_path

    log = engine_log_path(opts)
    notes = getattr(exc, "__notes__", None) or []
    if log is None or not debug_enabled() or f"engine log: {log}" not in notes:
        return
    tail = log_tail(log)
    if tail:
        print(f"curate: the last lines of {log}:\n{tail}", file=sys.stderr)


def _typed(ctx: typer.Context, params: Mapping[str, Any]) -> set[str]:
    """The parameters given on the command line (or by their environment variable)."""
    # By the source's name: typer may bring its own copy of click and of this enum.
    given = ("COMMANDLINE", "ENVIRONMENT")
    return {name for name in params if getattr(ctx.get_parameter_source(name), "name", "") in given}


def backend_flags(
    backend: str,
    params: Mapping[str, Any],
    assignments: Sequence[str] = (),
    *,
    typed: Collection[str] = (),
) -> BackendOptions | dict[str, Any]:
    """The chosen backend's options from its flags and `--option NAME=VALUE`s, validated
    by its schema. A flag that defaults to None belongs to one backend: giving it to
    another is an error; so is setting one option both ways (`typed`: the flags the
    user typed)."""
    chosen = _flags_of(backend, params)
    if not assignments:
        return chosen
    schema = options_schema(backend)
    extra = schema.assignments(assignments, backend=backend)
    values = (
        {name: getattr(chosen, name) for name in chosen.given}
        if isinstance(chosen, BackendOptions)
        else {}
    )
    for name in extra:
        if name in typed:
            raise UsageError(f"{flag_name(name)} and --option {name} both set it: give one")
    return schema.parse({**values, **extra})


def _flags_of(backend: str, params: Mapping[str, Any]) -> BackendOptions | dict[str, Any]:
    chosen: BackendOptions | dict[str, Any] = {}
    for name, schema in FLAG_SCHEMAS.items():
        # A repeatable flag not given is an empty list: not given.
        values = {
            f.name: None if params[f.name] in ([], ()) else params[f.name]
            for f in schema.flag_fields()
        }
        if name == backend:
            chosen = schema.parse({k: v for k, v in values.items() if v is not None})
        elif schema.flags_default_to_none:
            given = [k for k, v in values.items() if v is not None]
            if given:
                raise UsageError(f"{flag_name(given[0])} is an option of --backend {name}")
    return chosen


def adaptive_line(r: _adaptive.AdaptiveResult) -> str:
    """One line on what the adaptive loop did, against the fixed-N run it replaces."""
    cap = r.params.get("max_runs")
    text = (
        f"adaptive: {r.rounds} round(s), {r.spent} rollouts for {r.samples} samples, "
        f"{r.mixed} mixed, {r.capped} all-same at the cap"
    )
    if cap and r.samples:
        fixed = cap * r.samples
        text += f"; a fixed {cap} per sample would be {fixed} ({1 - r.spent / fixed:.0%} saved)"
    return f"{text}; stopped: {r.stop_reason}"


def _print_start(checked: Preflight) -> None:
    """How references are read, the grader and why, and one prompt as the model sees it."""
    import sys

    for line in checked.lines():
        print(line, file=sys.stderr)


def _print_dry_run(
    opts: EvalOptions, price_in: float | None, price_out: float | None, *, quiet: bool = False
) -> None:
    from curate.evaluation.estimate import estimate_eval
    from curate.evaluation.options import checked_policy
    from curate.evaluation.preflight import preflight

    checked_policy(opts)  # its option errors first, as `evaluate` does
    checked = preflight(opts)
    try:
        if not quiet:
            _print_start(checked)
        refusal = checked.refusal(opts.data)
        if refusal is not None:
            raise refusal
        e = estimate_eval(opts, price_in, price_out, checked=checked)
    finally:
        checked.close()
    if e["runs"] is None:  # adaptive with --budget alone: no per-sample cap
        head = f"{e['samples']} samples, at most {e['rollouts_total']} rollouts in all"
    else:
        head = f"{e['samples']} samples x {e['runs']} rollouts = {e['rollouts_total']} rollouts"
    bound = "at most " if opts.adaptive else ""
    print(
        f"dry run: {head}, {e['rollouts_stored']} already stored in {e['run_dir']}, "
        f"{bound}{e['rollouts_todo']} to generate"
    )
    print(
        f"tokens: prompt ~{e['prompt_tokens']:,} ({e['token_count']}, {e['mode']} mode), "
        f"completion <= {e['completion_tokens_max']:,} (max_tokens per rollout)"
    )
    if e["cost_usd_max"] is None:
        print("cost: pass --price-in and --price-out (USD per million tokens) for an estimate")
    else:
        print(
            f"cost: <= ${e['cost_usd_max']:,.4f} at ${price_in or 0:g}/M prompt, "
            f"${price_out or 0:g}/M completion tokens"
        )


def _log_to_stderr(name: str) -> None:
    """Show a backend's warnings and its closing summary (requests, retries) on stderr."""
    import logging
    import sys

    logger = logging.getLogger(name)
    # Replace an earlier call's handler: sys.stderr may have been swapped since.
    for old in [h for h in logger.handlers if getattr(h, "_curate", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("curate: %(message)s"))
    handler._curate = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
