"""`build_report`: from a run or score table to everything `curate report` prints and
checks (the library call behind the command)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD
from curate.core.reasoning import DEFAULT_TRUNCATION, Truncation
from curate.errors import UsageError
from curate.report.checks import CheckResult, evaluate_checks
from curate.stats.dataset import DatasetSummary
from curate.stats.suspects import DEFAULT_MIN_N, DEFAULT_MIN_SHARE
from curate.store.certainty import has_certainties, read_certainties
from curate.trainers.settings import check_settings, plan_dynamic_sampling

if TYPE_CHECKING:
    from curate.analysis.suspects import SuspectCheck
    from curate.store.run_dir import RolloutStore

# The column the report breaks its figures down by when none is asked for (when present).
DEFAULT_GROUP_COLUMN = "data_source"


@dataclass
class Report:
    source: str
    summary: DatasetSummary
    checks: list[CheckResult]
    usage: dict[str, Any] | None
    # Suspect labels (curate.analysis.suspects); None when not asked for (suspects=False).
    suspects: SuspectCheck | None = None

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [g for g in self.checks if not g.passed]


def build_report(
    path: str | os.PathLike[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    group_size: int = DEFAULT_GROUP_SIZE,
    fail_under_signal: float | None = None,
    max_error_rate: float | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    group_by: str | None = None,
    suspects: bool | None = None,
    suspect_min_n: int = DEFAULT_MIN_N,
    suspect_min_share: float = DEFAULT_MIN_SHARE,
    trainer: str | None = None,
    train_batch_size: int | None = None,
    gen_batch_size: int | None = None,
    max_gen_batches: int | None = None,
) -> Report:
    """Read the scores once, summarise them, check the requested checks.

    The summary's `by_group` breaks the figures down by `group_by`, a column of the
    run's samples.parquet or of the score table (an error when missing), or by
    `data_source` when there is one.

    `suspects`: check for suspect labels (True), do not (False), or check when the input
    has extracted answers and few enough rollouts for the check to be cheap (None;
    `curate.analysis.suspects.report_suspects`).

    `trainer` with `train_batch_size`: the dynamic-sampling settings for that trainer at
    the run's mixed-group share at `group_size` (`curate.trainers.settings`), in the
    summary's `trainer_settings`."""
    from curate.analysis import load_analysis
    from curate.analysis.lengths import load_lengths
    from curate.stats.lengths import length_warnings
    from curate.stats.suspects import check_parameters

    check_parameters(suspect_min_n, suspect_min_share)  # before the read: fail fast
    plan_trainer = trainer_settings_request(
        trainer, train_batch_size, gen_batch_size, max_gen_batches
    )

    # Data-set statistics only: one pass over the file (token columns included), and
    # 0/1 scores compressed to a few weighted rows (no per-sample frame is kept).
    loaded = load_analysis(
        path,
        threshold=threshold,
        group_size=group_size,
        per_sample=False,
        group_by=group_by or DEFAULT_GROUP_COLUMN,
        require_group=group_by is not None,
    )
    checks = evaluate_checks(
        loaded.summary, fail_under_signal=fail_under_signal, max_error_rate=max_error_rate
    )
    if plan_trainer is not None:
        plan = plan_dynamic_sampling(
            loaded.summary.gate["expected_open_fraction"],
            trainer=plan_trainer,
            train_batch_size=int(train_batch_size or 0),
            group_size=group_size,
            gen_batch_size=gen_batch_size,
            max_gen_batches=max_gen_batches,
        )
        loaded.summary.extra["trainer_settings"] = plan.to_dict()
    # Token counts (and cost, given prices) when the input has them; else no section.
    usage = with_prefill(loaded.usage(price_in, price_out), loaded.source.store, price_in)
    # Lengths by outcome and truncation, when the input has completion token counts
    # (from the rows the read above holds; token counts and outcomes, never the text).
    # Every counted rollout is scored unless cut-short ones are error rows or excluded:
    # then the summary's sample count is the length section's too.
    policy = loaded.manifest.truncation if loaded.manifest is not None else DEFAULT_TRUNCATION
    hint = loaded.summary.samples if policy in (Truncation.GRADE, Truncation.WRONG) else None
    lengths = load_lengths(path, loaded.manifest, rows=loaded.source.lengths(), samples_hint=hint)
    if lengths is not None:
        from curate.analysis.confidence import token_count_sources

        lengths.section["token_counts"] = token_count_sources(path)
        loaded.summary.extra["lengths"] = lengths.section
        loaded.summary.warnings.extend(length_warnings(lengths.section))
    # Token confidence against the grade, when the run stored it (--logprobs).
    from curate.analysis.confidence import load_confidence

    if (confidence := load_confidence(path)) is not None:
        loaded.summary.extra["confidence"] = confidence
    # Answers with no letter or digit: their count and one example (a second read, of
    # the completion texts; none for a bare score table).
    from curate.analysis.empty import load_empty

    empty = load_empty(path)
    if empty is not None:
        loaded.summary.extra["empty_completions"] = empty
    check = None
    if suspects is not False:
        from curate.analysis.suspects import report_suspects

        check = report_suspects(
            path,
            rollouts=loaded.summary.rollouts,
            asked=suspects,
            min_n=suspect_min_n,
            min_share=suspect_min_share,
            manifest=loaded.manifest,
        )
    return Report(
        source=str(path), summary=loaded.summary, checks=checks, usage=usage, suspects=check
    )


def trainer_settings_request(
    trainer: str | None,
    train_batch_size: int | None,
    gen_batch_size: int | None,
    max_gen_batches: int | None,
) -> str | None:
    """The trainer to plan dynamic sampling for (verl when only --train-batch-size is
    given), or None; a UsageError before any reading for options that do not fit
    (`curate.trainers.settings.check_settings`)."""

    if trainer is None and train_batch_size is None:
        if gen_batch_size is not None or max_gen_batches is not None:
            raise UsageError("--gen-batch-size and --max-gen-batches need --train-batch-size")
        return None
    if train_batch_size is None:
        raise UsageError(f"--trainer {trainer} needs --train-batch-size (prompts per step)")
    name = trainer or "verl"
    check_settings(name, train_batch_size, gen_batch_size, max_gen_batches)
    return name


def with_prefill(
    usage: dict[str, Any] | None, store: RolloutStore | None, price_in: float | None
) -> dict[str, Any] | None:
    """`usage` with the prefill tokens of a `--grader r3` run (`prefill_tokens`, also in the
    cost as prompt tokens): the reference scored after each rollout is a second prompt the
    model reads, which the rollouts' own prompt_tokens do not count."""
    if store is None or not has_certainties(store.run_dir):
        return usage
    tokens = read_certainties(store.run_dir)["tokens_in"].sum()
    out: dict[str, Any] = (
        dict(usage) if usage is not None else {"prompt_tokens": None, "completion_tokens": None}
    )
    out.setdefault("cost_usd", None)
    prefill = int(tokens or 0)
    out["prefill_tokens"] = prefill
    if price_in is not None and out["cost_usd"] is not None:
        out["cost_usd"] += prefill * price_in / 1e6
    return out
