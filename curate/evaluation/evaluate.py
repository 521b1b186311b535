"""`curate eval` as a library call: data -> prompts -> backend -> graded rollouts on disk.

`EvalOptions` (curate/evaluation/options.py) is the request as a user states it: `curate
eval` parses its flags into one and calls `evaluate` (or `estimate_eval` for --dry-run),
exactly as Python callers do. `evaluate` loads the data, opens the backend and hands an
`Evaluation` (curate/evaluation/spec.py) to `run_eval` or `run_adaptive`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.backends.base import Backend
from curate.backends.engine_output import engine_output_to, entered_quietly
from curate.backends.options import BackendOptions
from curate.backends.registry import open_backend
from curate.backends.vllm_options import check_model_source
from curate.core.deepen import DeepenRequest
from curate.core.reasoning import (
    Truncation,
    parse_truncation,
)
from curate.data.samples import (
    build_prompts,
    file_sha256,
    prompts_by_id,
)
from curate.errors import CurateError, RunError, UsageError
from curate.evaluation.adaptive import AdaptivePolicy, run_adaptive
from curate.evaluation.context import check_context
from curate.evaluation.deepen import DeepenPlan, deepen_request, plan_deepen, with_record

# The names marked F401 moved to curate.evaluation.options: importable from here for one
# release, for callers outside curate (nothing in curate imports them from here).
from curate.evaluation.options import (
    ENGINE_LOG,  # noqa: F401
    LOCAL_ENGINES,
    EvalOptions,
    checked_policy,
    default_run_dir,  # noqa: F401
    engine_log_path,
    load_eval_samples,  # noqa: F401
    local_chat_template,  # noqa: F401
)
from curate.evaluation.preflight import Preflight, preflight
from curate.evaluation.progress import Progress
from curate.evaluation.runner import EvalResult, run_eval
from curate.evaluation.settings import SCORE_KEYS, EvalSettings, score_differences
from curate.evaluation.sharding import record_shard, shard_frame
from curate.evaluation.spec import Evaluation
from curate.graders.judge import judge_settings_of, judge_usage_of, merge_usage
from curate.store.manifest import RunManifest
from curate.store.run_dir import PairTally, RolloutStore, set_aside_corrupt_shards

# One status line for the user ("starting the vLLM engine ..."); None: say nothing.
Status = Callable[[str], None]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during an eval, with what is kept: still a KeyboardInterrupt for callers,
    and its message tells `curate eval` what to print."""

    def __init__(self, run_dir: Path, stored: int) -> None:
        self.run_dir, self.stored = run_dir, stored
        super().__init__(
            f"interrupted; {stored} rollouts are stored in {run_dir}: "
            "run the same command again to resume"
        )


@dataclass
class EvalOutcome:
    run_dir: Path
    result: EvalResult
    settings: EvalSettings
    set_aside: list[Path] = field(default_factory=list)  # unreadable shards moved away
    # The LLM judge's usage this call (calls, cached, tokens, cost), for `--grader judge`.
    judge_usage: dict[str, Any] | None = None
    # Where this process's pairs stand after the call (None: not counted, adaptive).
    tally: PairTally | None = None
    # What `--deepen` chose (None: not a deepen).
    deepen: DeepenPlan | None = None

    @property
    def all_failed(self) -> bool:
        """Nothing was learned, in a way that the same command repeats: every rollout
        this call generated is an error and some would be retried, or every pair of the
        run is done and none holds a score (its errors recur: a re-run, which generates
        nothing, fails the same way)."""
        r = self.result
        if r.rollouts > 0 and r.errors == r.rollouts and r.errors > r.settled:
            return True
        return self.tally is not None and self.tally.never_scored


def evaluate(
    opts: EvalOptions,
    progress: Progress | None = None,
    *,
    announce: Callable[[Preflight], None] | None = None,
    status: Status | None = None,
) -> EvalOutcome:
    """Run (or resume) an evaluation; returns where it is and what was done.

    Before the engine starts, the references are read and checked (`preflight`):
    `announce` gets the result first (the CLI prints `Preflight.lines()`), then a
    grader that cannot use too many references stops the run with a UsageError.
    `status` receives a line when a local engine starts and when it is ready. Ctrl-C
    raises `Interrupted` (a KeyboardInterrupt) saying how many rollouts are stored."""
    if opts.runs < 1:
        raise UsageError("--rollouts must be at least 1")
    try:
        truncation = parse_truncation(opts.truncation)
    except ValueError as exc:
        raise UsageError(f"--truncated {exc}") from None
    policy = checked_policy(opts)
    deepen = deepen_options(opts)
    options = opts.backend_options()  # an unknown backend or bad option: before any work
    pf = preflight(opts)
    try:
        if opts.backend in LOCAL_ENGINES:
            check_model_source(opts.model)  # a typo fails now, not after a minute of retries
            parser = getattr(options, "reasoning_parser", None)
            if parser:
                from curate.backends.vllm_local import reasoning_parser_class

                reasoning_parser_class(parser)  # before the engine log or anything is written
        if announce is not None:
            announce(pf)
        refusal = pf.refusal(opts.data)
        if refusal is not None:
            raise refusal
        if opts.context_check:
            _check_context(opts, pf)
        return _evaluate(opts, progress, policy, options, pf, status, truncation, deepen)
    finally:
        pf.close()


def _check_context(opts: EvalOptions, pf: Preflight) -> None:
    """Refuse (UsageError, before anything is written) a run whose longest prompt plus
    max_tokens does not fit the model's context window."""
    mode = opts.known_mode() or "chat"
    prompts = build_prompts(pf.frame, pf.fields, mode, system=opts.system, source=opts.data)
    ids = pf.frame["sample_id"].to_list()
    check = check_context(opts, dict(zip(ids, prompts, strict=True)), mode)
    refusal = check.refusal() if check is not None else None
    if refusal is not None:
        raise refusal


def _evaluate(
    opts: EvalOptions,
    progress: Progress | None,
    policy: AdaptivePolicy | None,
    options: BackendOptions,
    pf: Preflight,
    status: Status | None,
    truncation: Truncation,
    deepen_req: DeepenRequest | None = None,
) -> EvalOutcome:
    frame, fields, grader = pf.frame, pf.fields, pf.grader
    mine = shard_frame(frame, opts.shard)  # the samples this process evaluates
    references = pf.references
    grader_spec = pf.grader_spec
    run_dir = opts.run_dir()
    store = RolloutStore(run_dir)
    # No rollout yet: no settings to keep. --force-new clears the directory below,
    # under the writer lock, so a refused second writer never deletes the first's work.
    previous = None if opts.force_new else store.previous_manifest()
    mode = opts.known_mode()
    settings = EvalSettings(
        model=opts.model,
        backend=opts.backend,
        runs=opts.runs,
        mode=mode or "chat",
        sampling=opts.sampling(),
        seed=opts.seed,
        grader=grader_spec,
        dataset_path=str(opts.data),
        dataset_sha256=file_sha256(opts.data, split=opts.split),
        prompt_field=fields.prompt_field,
        messages_field=fields.messages_field,
        answer_field=fields.answer_field,
        id_field=fields.id_field,
        layout=fields.layout,
        template=opts.template,
        system=opts.system,
        limit=opts.limit,
        engine_options=options.record(),
        adaptive=_manifest_policy(policy, previous),
        reference_extract=pf.extraction_record(),
        grader_reason=pf.grader_reason,
        grader_timeout_s=opts.grader_timeout,
        score_range=list(opts.score_range) if opts.score_range is not None else None,
        reward_model=reward_model_record(grader),
        **judge_settings_of(grader),
        truncation=truncation,
        grader_notes=list(pf.grader_notes) or None,
    )
    # Refuse a mismatched resume before paying for an engine start.
    skip = {"chat_template_sha256"} | ({"mode"} if mode is None else set())
    _check_resume(previous, settings.manifest(), run_dir, ignore=skip)
    ids = mine["sample_id"].to_list()
    deepen = (
        None
        if deepen_req is None
        else plan_deepen(store, previous, deepen_req, ids, opts.runs, opts.seed)
    )
    targets: int | dict[str, int] = opts.runs if deepen is None else deepen.targets
    # Every (sample, run) pair stored: write nothing and start nothing, so a finished
    # run re-runs on a read-only copy. (The adaptive loop decides for itself.)
    if policy is None and previous is not None and not opts.set_aside_corrupt:
        tally = store.pair_tally(mine["sample_id"], opts.runs)
        todo = tally.missing if deepen is None else _deepen_missing(store, deepen)
        if todo == 0:
            if deepen is not None and not deepen.resumed:
                # Every chosen prompt is deep enough already (an earlier, larger deepen):
                # record the choice, start nothing.
                with store.writer(None):
                    store.write_manifest(with_record(dict(previous), previous, deepen))
            skipped = EvalResult(skipped=mine.height * opts.runs)
            return EvalOutcome(run_dir, skipped, settings, tally=tally, deepen=deepen)
    try:
        with (
            # One writer per run directory (per shard with --shard); before the engine starts.
            store.writer(opts.shard),
            _started_backend(opts, options, status) as backend,
        ):
            if opts.force_new:
                store.clear()
            set_aside = set_aside_corrupt_shards(store) if opts.set_aside_corrupt else []
            info = backend.info()
            if mode is None:
                mode = "chat" if info.has_chat_template else "completion"
            settings.mode = mode
            settings.chat_template_sha256 = info.chat_template_sha256 if mode == "chat" else None

            def build(previous: RunManifest | None) -> dict[str, Any]:
                body = settings.manifest(previous=previous)
                body["backend_info"] = {"model": info.model, **info.extra}
                if opts.split is not None:
                    body["dataset_split"] = opts.split
                body["reference_check"] = pf.check_record()
                return with_record(body, previous, deepen)

            def check(previous: RunManifest | None, body: dict[str, Any]) -> None:
                _check_resume(previous, body, run_dir, ignore=set())

            evaluation = Evaluation(
                backend=backend,
                grader=grader,
                prompts=prompts_by_id(mine, fields, mode, system=opts.system, source=opts.data),
                references=references,
                sampling=settings.sampling,
                mode=mode,
                seed=opts.seed,
                runs=targets,
                chunk_size=opts.chunk_size,
                truncation=truncation,
                unusable_references=pf.check.unusable,
            )
            if opts.shard is None:
                # Read again under the lock: another writer may have finished meanwhile.
                previous = None if opts.force_new else store.previous_manifest()
                manifest = build(previous)
                check(previous, manifest)
                store.create()
                store.write_samples(frame)
                store.write_manifest(manifest)
            else:
                manifest = record_shard(
                    store, opts.shard, opts.runs, opts.limit, build, check, frame
                )
            result: EvalResult
            try:
                if policy is None:
                    result = run_eval(store, evaluation, progress=progress)
                else:
                    result = run_adaptive(store, evaluation, policy, progress=progress)
                    # What the last adaptive pass did, for whoever reads the run later.
                    manifest["adaptive_summary"] = result.summary()
            finally:
                # What the judge cost is kept even when the run stops midway: the
                # judgements are cached and the tokens paid.
                usage = judge_usage_of(grader)
                if usage is not None:
                    manifest["judge_usage"] = merge_usage(
                        previous.get("judge_usage") if previous is not None else None, usage
                    )
                if usage is not None or policy is not None:
                    store.write_manifest(manifest)
    except KeyboardInterrupt as exc:
        if isinstance(exc, Interrupted):
            raise
        raise Interrupted(run_dir, _stored_count(store)) from exc
    return EvalOutcome(
        run_dir=run_dir,
        result=result,
        settings=settings,
        set_aside=set_aside,
        judge_usage=judge_usage_of(grader),
        tally=store.pair_tally(mine["sample_id"], opts.runs) if policy is None else None,
        deepen=deepen,
    )


def deepen_options(opts: EvalOptions) -> DeepenRequest | None:
    """The deepen `opts` ask for (None: not a deepen); its option errors before any work."""
    return deepen_request(
        opts.deepen,
        opts.deepen_to,
        opts.deepen_stratum,
        adaptive=opts.adaptive,
        shard=opts.shard is not None,
        force_new=opts.force_new,
    )


def _deepen_missing(store: RolloutStore, deepen: DeepenPlan) -> int:
    """The chosen prompts' rollouts below --to that a re-run would still draw."""
    targets = deepen.targets
    if not targets:
        return 0
    return store.pair_tally(list(targets), deepen.record["to"]).missing


@contextlib.contextmanager
def _started_backend(
    opts: EvalOptions, options: BackendOptions, status: Status | None
) -> Iterator[Backend]:
    """`open_backend`, with a local engine's output sent to RUN/engine.log, a line when
    it starts and when it is ready, and the log named on any failure while it runs."""
    log = engine_log_path(opts)
    say = status or (lambda line: None)
    local = opts.backend in LOCAL_ENGINES
    ray = getattr(options, "ray", None)  # --ray: replicas on a cluster, not one engine here
    where = f"log: {log}" if log is not None else "its output follows"
    if local and ray is not None:
        replicas = getattr(options, "replicas", 1)
        say(
            f"joining the Ray cluster ({ray}) for {replicas} vLLM replica(s) of "
            f"{opts.model}; they start with the first batch ({where})"
        )
    elif local:
        say(f"starting the vLLM engine for {opts.model} ({where}) ...")
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as f:  # where this session's lines begin
            f.write(f"\n=== curate eval: engine for {opts.model}, {time.ctime()} ===\n")
    started = time.perf_counter()
    try:
        with (
            engine_output_to(log),
            # Started and stopped with sys.stdout/sys.stderr on the log too: vLLM binds
            # its log handler to sys.stdout when it is imported, and prints at import.
            entered_quietly(
                open_backend(opts.backend, opts.model, options, seed=opts.seed)
            ) as backend,
        ):
            if local:
                what = "Ray cluster" if ray is not None else "engine"
                say(f"{what} ready in {time.perf_counter() - started:.1f} s")
            yield backend
    except Exception as exc:
        # The engine's own account of a failure is in the log, not on the terminal.
        if log is not None and (not isinstance(exc, CurateError) or isinstance(exc, RunError)):
            exc.add_note(f"engine log: {log}")
        raise


def _stored_count(store: RolloutStore) -> int:
    """Rollouts on disk (0 when they cannot be read: the message must still print)."""
    try:
        return store.rollouts(["sample_id", "rollout_idx"]).height if store.shard_paths() else 0
    except Exception:
        return 0


def _manifest_policy(
    policy: AdaptivePolicy | None, previous: RunManifest | None
) -> dict[str, Any] | None:
    """This run's adaptive parameters; once adaptive, a run stays marked adaptive (its
    unequal rollout counts remain after a fixed-N top-up)."""
    if policy is not None:
        return policy.params()
    if previous is not None and previous.adaptive:
        return dict(previous.adaptive_policy or {})
    return None


def _check_resume(
    previous: RunManifest | None, new: dict[str, Any], run_dir: Path, *, ignore: set[str]
) -> None:
    if previous is None:
        return
    old = {k: v for k, v in previous.items() if k in SCORE_KEYS and k not in ignore}
    cur = {k: v for k, v in new.items() if k in SCORE_KEYS and k not in ignore}
    diffs = score_differences(old, cur)
    if diffs:
        raise UsageError(
            f"{run_dir}: this run was made with other settings ({'; '.join(diffs)}); "
            "re-run with the original settings to resume, use another --out to keep both "
            "runs, or pass --force-new to discard this run's rollouts and start afresh"
        )


def reward_model_record(grader: object) -> dict[str, Any] | None:
    """The manifest's `reward_model` entry for a reward-model grader (None for others):
    where it was served (without credentials), which model, and the endpoint used."""
    record = getattr(grader, "manifest_record", None)
    return record() if callable(record) else None
