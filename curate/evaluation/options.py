"""What `curate eval` is asked to do, as a user states it: `EvalOptions` (a data file,
a model, a backend by name and its options, sampling, grading, adaptive settings), and
what every reader of those options resolves the same way: the samples they name
(`load_eval_samples`), the run directory, the adaptive policy, the shard checks.

`curate eval` parses its flags into one and calls `evaluate` (curate/evaluation/evaluate.py),
`estimate_eval` (--dry-run) or `preflight`; they, the context check and `curate grade`
read it from here, below the orchestrator."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.backends.options import BackendOptions
from curate.backends.registry import backend_options
from curate.core.prompts import Mode
from curate.core.reasoning import DEFAULT_TRUNCATION
from curate.core.sampling import DEFAULT_SAMPLING, SamplingConfig
from curate.core.shards import ShardSpec
from curate.data.samples import ANSWER_FIELDS, FieldMap, load_samples
from curate.errors import UsageError
from curate.evaluation.adaptive import DEFAULT_ROUND_SIZE, AdaptivePolicy
from curate.evaluation.spec import DEFAULT_CHUNK_SIZE, DEFAULT_ROLLOUTS
from curate.graders.base import DEFAULT_TIMEOUT_S
from curate.graders.checks import DEFAULT_MAX_BAD_FRACTION
from curate.graders.code import TEST_FIELDS
from curate.graders.registry import grader_kind
from curate.stats.confidence import DEFAULT_WINDOW, MAX_LOGPROBS

if TYPE_CHECKING:
    import polars as pl

    from curate.core.options import OptionSchema
    from curate.graders.judge import JudgeConfig
    from curate.graders.reward_model import RewardModelConfig


# The engine's own output (vLLM, torch, their worker processes) goes here in the run
# directory, so that the terminal keeps curate's progress and summary.
ENGINE_LOG = "engine.log"
# Backends that start an engine in this machine's processes (and write to its fds).
LOCAL_ENGINES = frozenset({"vllm"})


@dataclass
class EvalOptions:
    data: Path
    model: str
    backend: str = "vllm"
    runs: int = DEFAULT_ROLLOUTS
    out: Path | None = None
    grader: str | None = None
    temperature: float = DEFAULT_SAMPLING.temperature
    top_p: float = DEFAULT_SAMPLING.top_p
    max_tokens: int = DEFAULT_SAMPLING.max_tokens
    stop: tuple[str, ...] = ()
    seed: int = 0
    mode: Mode | None = None  # None: chat when the model has a chat template
    system: str | None = None
    template: str | None = None
    # The data set's layout (curate/data/layouts/): "auto" detects it, "none" uses the
    # generic field names, a name forces that layout.
    layout: str = "auto"
    prompt_field: str | None = None
    answer_field: str | None = None
    id_field: str | None = None
    limit: int | None = None
    force_new: bool = False
    set_aside_corrupt: bool = False  # move unreadable shards into rollouts/corrupt/
    chunk_size: int = DEFAULT_CHUNK_SIZE
    # The backend's options: its schema object (VllmOptions, OpenAIOptions, FakeOptions)
    # or a mapping of the options given, validated against that schema.
    engine_options: BackendOptions | dict[str, Any] = field(default_factory=dict)
    # Adaptive evaluation (curate/evaluation/adaptive/); the others need adaptive=True.
    adaptive: bool = False
    round_size: int | None = None
    max_runs: int | None = None  # default: `runs`, or no cap with a budget
    budget: int | None = None
    balanced: int | None = None
    split: str | None = None  # one split of a saved Hugging Face DatasetDict
    # Deepening a finished fixed-N run (curate/core/deepen.py): K prompts drawn among
    # the always-incorrect / always-correct ones get rollouts up to `deepen_to`.
    deepen: int | None = None
    deepen_to: int | None = None
    deepen_stratum: str | None = None  # None: both strata, K split in proportion
    # Grading (curate/evaluation/preflight.py): how references are read (one of
    # curate.graders.references.EXTRACT_MODES), the share of references the grader may
    # fail to use before the run refuses to start, the per-call deadline of graders in
    # worker processes, and a continuous reward's (low, high) range.
    reference_extract: str = "auto"
    max_bad_references: float = DEFAULT_MAX_BAD_FRACTION
    grader_timeout: float = DEFAULT_TIMEOUT_S
    score_range: tuple[float, float] | None = None
    # Where `--grader reward-model` finds its server (curate/graders/reward_model.py).
    reward_model: RewardModelConfig | None = None
    # `--grader judge`: the judge's settings (its cache goes into the run directory).
    judge: JudgeConfig | None = None
    # Another grader kind's own options (an instance of its schema: a plugin's, say),
    # from `-O KIND.NAME=VALUE` (curate.graders.registry.grader_options).
    grader_options: OptionSchema | None = None
    # Worker processes (threads for the code grader) of the graders that use them
    # (None: the default), and the code grader's scoring ("all" or "fraction"; None:
    # what the --grader spec says).
    grader_workers: int | None = None
    code_score: str | None = None
    # A local engine's own output: to RUN/engine.log (True) or left on fds 1 and 2.
    engine_log: bool = True
    # How a rollout cut short (max_tokens, or reasoning never closed) is scored and
    # counted: a `curate.core.reasoning.Truncation` or its name, checked once by
    # `evaluate`.
    truncation: str = DEFAULT_TRUNCATION
    # The longest prompt plus max_tokens checked against the model's context window
    # before anything starts (curate/evaluation/context.py).
    context_check: bool = True
    # This process's share of an array job (curate/core/shards.py); None: every sample.
    shard: ShardSpec | None = None
    # Token confidence (curate/stats/confidence.py): the top K log-probabilities per
    # token (None: not asked), the window of the group and tail confidence (None: the
    # default), and whether the per-token arrays are stored too.
    logprobs: int | None = None
    confidence_window: int | None = None
    keep_token_logprobs: bool = False

    def backend_options(self) -> BackendOptions:
        """The backend's validated options."""
        return backend_options(self.backend, self.engine_options)

    def sampling(self) -> SamplingConfig:
        return SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            stop=tuple(self.stop),
            logprobs=self.logprobs,
            confidence_window=None
            if self.logprobs is None
            else self.confidence_window or DEFAULT_WINDOW,
            keep_token_logprobs=self.keep_token_logprobs,
        )

    def run_dir(self) -> Path:
        """`out`, else runs/<data stem>__<model name>."""
        return self.out or default_run_dir(self.data, self.model)

    def known_mode(self) -> Mode | None:
        """The prompt mode, when it is known before the backend starts: as given, else
        from a local model directory's chat template (None: the backend will tell)."""
        if self.mode is not None:
            return self.mode
        has_template = local_chat_template(self.model)
        if has_template is None:
            return None
        return "chat" if has_template else "completion"


def default_run_dir(data: Path, model: str) -> Path:
    """runs/<data stem>__<model name>: the same command resumes the same run."""
    model_name = Path(model.rstrip("/")).name or model
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{data.stem}__{model_name}")
    return Path("runs") / safe


def local_chat_template(model: str) -> bool | None:
    """Whether a local model directory ships a chat template (None: can't tell yet)."""
    config = Path(model) / "tokenizer_config.json"
    if not config.is_file():
        return None
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return bool(data.get("chat_template")) or (Path(model) / "chat_template.jinja").is_file()


def load_eval_samples(opts: EvalOptions) -> tuple[pl.DataFrame, FieldMap]:
    """The samples `opts` names, with their fields resolved and a `sample_id` each.
    For the code grader the "answer" is the tests column (test, test_list, ...)."""
    answer_names: tuple[str, ...] = ANSWER_FIELDS
    if grader_kind(opts.grader) == "code" and opts.answer_field is None:
        answer_names = (*TEST_FIELDS, *ANSWER_FIELDS)
    return load_samples(
        opts.data,
        limit=opts.limit,
        split=opts.split,
        prompt_field=opts.prompt_field,
        answer_field=opts.answer_field,
        id_field=opts.id_field,
        template=opts.template,
        answer_names=answer_names,
        layout=opts.layout,
    )


def engine_log_path(opts: EvalOptions) -> Path | None:
    """Where a local engine's output goes for these options (None: not captured)."""
    if opts.backend not in LOCAL_ENGINES or not opts.engine_log:
        return None
    return opts.run_dir() / ENGINE_LOG


def checked_policy(opts: EvalOptions) -> AdaptivePolicy | None:
    """The option checks every reader of `opts` runs before any work (the run, its dry
    run, the estimate), in one order; returns the adaptive policy (None: fixed N)."""
    check_logprob_options(opts)
    policy = adaptive_policy(opts)
    check_shard_options(opts)
    check_group_grader(opts)
    return policy


def check_logprob_options(opts: EvalOptions) -> None:
    """--logprobs K within what every backend serves; the window and the arrays only
    with it."""
    k = opts.logprobs
    if k is not None and not 1 <= k <= MAX_LOGPROBS:
        raise UsageError(f"--logprobs must be from 1 to {MAX_LOGPROBS}, not {k}")
    if opts.confidence_window is not None and opts.confidence_window < 1:
        raise UsageError(
            f"--confidence-window must be at least 1 token, not {opts.confidence_window}"
        )
    if k is None and (opts.keep_token_logprobs or opts.confidence_window is not None):
        given = "--keep-token-logprobs" if opts.keep_token_logprobs else "--confidence-window"
        raise UsageError(f"{given} needs --logprobs K")


def check_group_grader(opts: EvalOptions) -> None:
    """`--grader r3` grades each sample's group at once (curate/evaluation/r3.py): runs that
    add rollouts to groups already graded are refused."""
    if grader_kind(opts.grader) != "r3":
        return
    for given, flag in ((opts.adaptive, "--adaptive"), (opts.deepen is not None, "--deepen")):
        if given:
            raise UsageError(
                f"--grader r3 grades each sample's rollouts as one group; {flag} adds "
                "rollouts to groups already graded: run a fixed number of rollouts (-n)"
            )


def check_shard_options(opts: EvalOptions) -> None:
    """--shard's conflicts with other options (UsageError, before any work)."""
    if opts.shard is None:
        return
    if opts.adaptive:
        raise UsageError(
            "--shard does not combine with --adaptive: an adaptive run's rounds and "
            "budget are the whole run's"
        )
    if opts.force_new:
        raise UsageError(
            "--force-new does not combine with --shard: it would delete the other "
            "shards' rollouts; clear the run directory once before the array job instead"
        )


def adaptive_policy(opts: EvalOptions) -> AdaptivePolicy | None:
    """The adaptive policy the options ask for (None: a fixed-N run)."""
    extras = {
        "--round-size": opts.round_size,
        "--max-rollouts": opts.max_runs,
        "--budget": opts.budget,
        "--balanced": opts.balanced,
    }
    if not opts.adaptive:
        given = [name for name, value in extras.items() if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --adaptive")
        return None
    # Without a budget the cap is --rollouts, so `--adaptive -n 8` never does more than
    # `-n 8` would; with a budget, hard samples may go deeper unless capped.
    cap = opts.max_runs if opts.max_runs is not None else (None if opts.budget else opts.runs)
    return AdaptivePolicy(
        round_size=opts.round_size if opts.round_size is not None else DEFAULT_ROUND_SIZE,
        max_runs=cap,
        budget=opts.budget,
        balanced=opts.balanced,
    )
