"""A run's rollouts as training material: per sample, its prompt (as `curate eval` built
it) and every stored rollout with its text and reward (`load_pools`).

The texts a trainer learns from are chosen here once for every format:

* error rows are not rollouts (no reward): they are left out of every pool;
* a rollout cut short (max_tokens, or reasoning never closed: the store's `truncated`)
  stays in its pool with its reward, since a GRPO-style group must hold what the policy
  produced, but it is never `usable` as a target: not an SFT completion, not a chosen
  or rejected response;
* the reasoning the engine kept apart from the answer is put back in front of it with
  the model's think markers (`reasoning="keep"`, what the model wrote) or left out
  (`reasoning="drop"`, the answer only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from curate.analysis import load_analysis
from curate.core.outcome import PASS_SCORE
from curate.core.reasoning import ReasoningSplit, joined
from curate.errors import InputError, UsageError
from curate.exports.prepare import export_fields, prepare_batch
from curate.store.manifest import RunManifest
from curate.store.run_dir import RolloutStore, is_run_dir
from curate.store.scores import excludes_truncated

Reasoning = Literal["keep", "drop"]
REASONING_CHOICES: tuple[Reasoning, ...] = ("keep", "drop")
Style = Literal["conversational", "standard"]
STYLES: tuple[Style, ...] = ("conversational", "standard")

_COLUMNS = [
    "sample_id",
    "rollout_idx",
    "score",
    "error",
    "completion",
    "truncated",
    "reasoning",
    "reasoning_closed",
]


@dataclass(frozen=True)
class ScoredRollout:
    """One scored rollout of a pool."""

    rollout_idx: int
    score: float
    text: str
    truncated: bool

    @property
    def passed(self) -> bool:
        return self.score >= PASS_SCORE

    @property
    def usable(self) -> bool:
        """May be a training target (SFT completion, chosen or rejected response): not
        cut short, and not empty."""
        return not self.truncated and bool(self.text.strip())


@dataclass(frozen=True)
class Pool:
    """One sample: its prompt, its scored rollouts (in rollout_idx order) and the smoothed
    pass rate `curate report` shows for it."""

    sample_id: str
    prompt: Any
    """Messages ({role, content} list) for the conversational style, text for standard."""
    rollouts: list[ScoredRollout]
    smoothed_pass_rate: float | None

    @property
    def size(self) -> int:
        return len(self.rollouts)

    @property
    def passes(self) -> int:
        return sum(r.passed for r in self.rollouts)

    @property
    def pass_rate(self) -> float:
        """The pool's raw share of passing rollouts, K/N."""
        return self.passes / self.size

    @property
    def scores(self) -> list[float]:
        return [r.score for r in self.rollouts]


@dataclass(frozen=True)
class Pools:
    pools: list[Pool]
    style: Style
    errors: int  # error rows left out
    manifest: Mapping[str, Any]


def completion_text(
    completion: str | None, reasoning: str | None, closed: bool | None, choice: Reasoning
) -> str:
    """The completion a trainer sees: the answer, after its reasoning in the model's
    think markers (`keep`) or alone (`drop`)."""
    answer = completion or ""
    if choice == "drop" or reasoning is None:
        return answer
    return joined(ReasoningSplit(answer if closed is not False else None, reasoning, closed))


def load_pools(
    run: str | Path, *, reasoning: Reasoning = "keep", style: Style | None = None
) -> Pools:
    """Every sample of the run directory `run` with its prompt and scored rollouts.

    `style` None: conversational for a chat-mode run, standard for a completion-mode
    one; standard on a chat-mode run renders each prompt with the model's chat template
    (the text the engine generated from)."""
    import polars as pl

    run = Path(run)
    if not run.is_dir() or not is_run_dir(run):
        raise InputError(
            "not a run directory from `curate eval` (exports of rollouts need their texts)",
            path=run,
        )
    if reasoning not in REASONING_CHOICES:
        raise UsageError(f"--reasoning {reasoning!r}: expected keep or drop")
    analysis = load_analysis(run)
    run_manifest = analysis.manifest
    manifest: Mapping[str, Any] = run_manifest if run_manifest is not None else {}
    samples = analysis.samples()
    if samples is None:
        raise InputError("the run keeps no samples.parquet (its prompts)", path=run)
    store = RolloutStore(run)
    frame = store.rollouts(_COLUMNS)
    if "completion" not in frame.columns or frame["completion"].null_count() == frame.height:
        raise InputError("the run stores no completion texts", path=run)
    if excludes_truncated(run_manifest):  # the run leaves them out of its statistics: so do we
        frame = frame.filter(~pl.col("truncated").fill_null(False))
    errors = frame.filter(pl.col("error").is_not_null() | pl.col("score").is_null()).height
    frame = frame.filter(pl.col("error").is_null() & pl.col("score").is_not_null())
    mode = "completion" if manifest.get("mode") == "completion" else "chat"
    chosen: Style = style or ("standard" if mode == "completion" else "conversational")
    prompts = _prompts(samples, run_manifest, run, mode, chosen)
    smoothed = dict(
        analysis.per_sample.select(
            pl.col("sample_id").cast(pl.String), "smoothed_pass_rate"
        ).iter_rows()
    )
    grouped: dict[str, list[ScoredRollout]] = {}
    for row in frame.sort("sample_id", "rollout_idx").iter_rows(named=True):
        text = completion_text(
            row["completion"], row["reasoning"], row["reasoning_closed"], reasoning
        )
        grouped.setdefault(str(row["sample_id"]), []).append(
            ScoredRollout(
                rollout_idx=int(row["rollout_idx"]),
                score=float(row["score"]),
                text=text,
                truncated=bool(row["truncated"]) or row["reasoning_closed"] is False,
            )
        )
    pools = [
        Pool(
            sample_id=sid, prompt=prompts[sid], rollouts=rows, smoothed_pass_rate=smoothed.get(sid)
        )
        for sid, rows in grouped.items()
        if sid in prompts
    ]
    return Pools(pools=pools, style=chosen, errors=errors, manifest=manifest)


def _prompts(
    samples: Any, run_manifest: RunManifest | None, run: Path, mode: str, style: Style
) -> dict[str, Any]:
    """sample_id -> prompt in `style`."""
    fields = export_fields(samples, manifest=run_manifest, source=run)
    manifest: Mapping[str, Any] = run_manifest if run_manifest is not None else {}
    batch = prepare_batch(
        samples,
        fields=fields,
        mode="completion" if mode == "completion" else "chat",
        system=manifest.get("system"),
        source=run,
    )
    prompts: Sequence[Any] = batch.trainer_prompts()
    if style == "standard" and batch.conversational:
        prompts = render_chat(prompts, manifest, run)
    elif style == "conversational" and not batch.conversational:
        raise UsageError(
            "--style conversational: the run used completion mode (raw text prompts, no "
            "messages); use --style standard"
        )
    return dict(zip(batch.sample_ids, prompts, strict=True))


def render_chat(messages: Sequence[Any], manifest: Mapping[str, Any], run: Path) -> list[str]:
    """Each message list rendered with the run's model's chat template, generation
    prompt added: the text the engine completed."""
    model = manifest.get("model")
    if not model:
        raise UsageError(f"{run}: --style standard needs the run's model (its chat template)")
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
        return [
            str(tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True))
            for m in messages
        ]
    except (OSError, ValueError, ImportError) as exc:
        raise UsageError(
            f"--style standard: cannot read the chat template of the run's model '{model}' "
            f"({type(exc).__name__}); use --style conversational"
        ) from exc
