"""`curate hint RUN` as a library call: hints for a run's collapsed prompts, rolled out
with the run's own model, sampling and grader into a hinted run inside RUN.

The hinted run lives in RUN/hints/<stratum>/ and is a run directory of its own: its
data file (`hinted.jsonl`) holds one row per collapsed prompt and hint level (the
original row, its prompt with the hint appended, and the columns `hint_id`, `hint_of`,
`hint_level`, `hint`, `hint_source`), so each rollout's hint and level are those of its
sample, and `curate report`, `curate filter` (every trainer format) and a resume work on
it as on any run. RUN's own files are not touched: its first-N figures stay exactly as
they were, as a deepened run's do (curate.core.deepen), and the hinted rows never enter
them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.deepen import CORRECT, INCORRECT
from curate.errors import CurateError, UsageError
from curate.hinting.summary import DEFAULT_BAND, HintSummary, summarize
from curate.hinting.templates import (
    TEMPLATE_SOURCE,
    hinted_id,
    hinted_text,
    template_hints,
)
from curate.store.run_dir import RolloutStore, is_run_dir

if TYPE_CHECKING:
    import polars as pl

    from curate.evaluation.evaluate import EvalOutcome, Status
    from curate.evaluation.preflight import Preflight
    from curate.evaluation.progress import Progress

HINTS_DIR = "hints"
DATA_FILE = "hinted.jsonl"
HINT_COLUMNS = ("hint_id", "hint_of", "hint_level", "hint", "hint_source")
STRATA = (INCORRECT, CORRECT)
# Graders whose settings a manifest does not hold in full (a server, a key variable).
_UNREPLAYABLE_GRADERS = ("judge", "reward-model")


@dataclass(frozen=True)
class HintRequest:
    """What `curate hint RUN` asks for."""

    run_dir: Path
    stratum: str = INCORRECT
    group_size: int | None = None  # None: the run's N
    band: tuple[float, float] = DEFAULT_BAND
    engine_log: bool = True
    engine_options: dict[str, Any] = field(default_factory=dict)  # over the run's own
    # Hints written by this model (None: the templates), through this backend (None: the
    # run's) with these options over the run's.
    hint_model: str | None = None
    hint_backend: str | None = None
    hint_options: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """One-line UsageErrors for a request that cannot mean anything."""
        if self.stratum not in STRATA:
            raise UsageError(f"--stratum must be one of {', '.join(STRATA)}, not {self.stratum!r}")
        if self.group_size is not None and self.group_size < 2:
            raise UsageError(
                f"-n must be at least 2 (a group of one is never mixed), not {self.group_size}"
            )
        low, high = self.band
        if not 0.0 <= low < high <= 1.0:
            raise UsageError(f"--band must be LOW,HIGH with 0 <= LOW < HIGH <= 1, not {low},{high}")

    @property
    def hinted_dir(self) -> Path:
        """RUN/hints/STRATUM for template hints, RUN/hints/STRATUM-model-NAME for a
        model's (a hinted run per source: its data file is its hints)."""
        name = self.stratum
        if self.hint_model is not None:
            tail = Path(self.hint_model.rstrip("/")).name or self.hint_model
            name += "-model-" + re.sub(r"[^A-Za-z0-9._-]+", "-", tail)
        return self.run_dir / HINTS_DIR / name

    @property
    def source(self) -> str:
        """The `hint_source` of this request's hints."""
        return TEMPLATE_SOURCE if self.hint_model is None else f"model:{self.hint_model}"


@dataclass(frozen=True)
class HintPlan:
    """The collapsed prompts of a run and their hinted rows."""

    manifest: dict[str, Any]
    runs: int
    collapsed: list[str]
    rows: pl.DataFrame  # the hinted data: original fields + HINT_COLUMNS
    without_hint: list[str]  # collapsed prompts no template can hint

    @property
    def hints(self) -> pl.DataFrame:
        return self.rows.select(*HINT_COLUMNS)


@dataclass
class HintOutcome:
    request: HintRequest
    plan: HintPlan
    evaluation: EvalOutcome | None
    summary: HintSummary

    @property
    def hinted_dir(self) -> Path:
        return self.request.hinted_dir


@dataclass(frozen=True)
class Collapsed:
    """A run's collapsed prompts, read and checked (nothing written)."""

    manifest: dict[str, Any]
    runs: int
    ids: list[str]
    rows: pl.DataFrame  # their samples.parquet rows, by sample id

    @property
    def prompt_field(self) -> str:
        return str(self.manifest["prompt_field"])

    @property
    def answer_field(self) -> str:
        return str(self.manifest["answer_field"])

    def problems(self) -> dict[str, tuple[str, str]]:
        """Sample id -> (prompt text, reference text as written in the data)."""
        return {
            row["sample_id"]: (str(row[self.prompt_field]), str(row[self.answer_field]))
            for row in self.rows.iter_rows(named=True)
        }


def read_collapsed(request: HintRequest) -> Collapsed:
    """Read RUN's collapsed prompts of the request's stratum. UsageError for a run this
    cannot replay."""
    import polars as pl

    from curate.evaluation.deepen import all_same_prompts

    request.check()
    where = request.run_dir
    if not is_run_dir(where):
        raise UsageError(f"{where}: not a run directory (no manifest.json)")
    store = RolloutStore(where)
    manifest = store.read_manifest()
    if manifest.get("adaptive"):
        raise UsageError(
            f"{where}: curate hint reads a fixed-N run's first N rollouts, and this run is adaptive"
        )
    for key, why in (("template", "--template"), ("messages_field", "a messages field")):
        if manifest.get(key):
            raise UsageError(
                f"{where}: this run built its prompts from {why}; curate hint appends a hint "
                "to a prompt field only"
            )
    grader = str(manifest.get("grader") or "")
    if grader.split(":", 1)[0] in _UNREPLAYABLE_GRADERS:
        raise UsageError(
            f"{where}: the {grader} grader needs settings the manifest does not keep; "
            "curate hint replays runs graded locally"
        )
    prompt_field, answer_field = manifest.get("prompt_field"), manifest.get("answer_field")
    runs = manifest.get("runs")
    if not isinstance(runs, int) or not prompt_field or not answer_field:
        raise UsageError(f"{where}: the manifest lacks runs, prompt_field or answer_field")
    samples = store.read_samples()
    if samples is None or samples.height == 0:
        raise UsageError(f"{where}: no samples.parquet, so no prompts to hint")
    for column in (prompt_field, answer_field):
        if column not in samples.columns:
            raise UsageError(f"{where}: samples.parquet has no {column!r} column")
    taken = [c for c in HINT_COLUMNS if c in samples.columns]
    if taken:
        raise UsageError(f"{where}: the data already has column(s) {', '.join(taken)}")
    ids = samples["sample_id"].to_list()
    tally = store.pair_tally(ids, runs)
    if tally.missing:
        raise UsageError(
            f"{where}: {tally.missing} of the first {runs} rollouts per prompt are missing; "
            "finish the run first"
        )
    try:
        strata = all_same_prompts(store, ids, runs, where)
    except UsageError as exc:
        if "partial credit" not in str(exc):
            raise
        raise UsageError(
            f"{where}: curate hint needs 0/1 scores, and this run's grader gives partial credit"
        ) from None
    collapsed = sorted(strata[request.stratum])
    rows = samples.filter(pl.col("sample_id").is_in(collapsed)).sort("sample_id")
    return Collapsed(manifest=manifest, runs=runs, ids=collapsed, rows=rows)


def plan_hints(
    request: HintRequest,
    collapsed: Collapsed | None = None,
    hints: dict[tuple[str, int], str] | None = None,
) -> HintPlan:
    """The hinted rows of RUN's collapsed prompts: `hints` (sample id, level) -> hint
    when given (a model's), else the templates' (nothing written)."""
    import polars as pl

    c = collapsed if collapsed is not None else read_collapsed(request)
    if hints is None:
        hints = {
            (sid, level): hint
            for sid, (_, reference) in c.problems().items()
            for level, hint in template_hints(reference).items()
        }
    records: list[dict[str, Any]] = []
    without: list[str] = []
    for row in c.rows.iter_rows(named=True):
        sid = row["sample_id"]
        mine = sorted((level, h) for (s, level), h in hints.items() if s == sid)
        if not mine:
            without.append(sid)
        for level, hint in mine:
            out = {k: v for k, v in row.items() if k != "sample_id"}
            out[c.prompt_field] = hinted_text(str(row[c.prompt_field]), hint)
            out.update(
                hint_id=hinted_id(sid, level),
                hint_of=sid,
                hint_level=level,
                hint=hint,
                hint_source=request.source,
            )
            records.append(out)
    if not records:
        raise UsageError(
            f"{request.run_dir}: none of the {len(c.ids)} always-{request.stratum} prompts "
            "got a hint"
            + (" (their references are too short)" if request.hint_model is None else "")
        )
    return HintPlan(
        manifest=c.manifest,
        runs=c.runs,
        collapsed=c.ids,
        rows=pl.DataFrame(records, infer_schema_length=None),
        without_hint=without,
    )


def stored_hints(request: HintRequest) -> dict[tuple[str, int], str] | None:
    """The hints of a hinted run already written by a model (its data file), so that a
    resume rolls out the same hints; None when there is none."""
    import polars as pl

    path = request.hinted_dir / DATA_FILE
    if request.hint_model is None or not path.is_file():
        return None
    rows = pl.read_ndjson(path).select("hint_of", "hint_level", "hint")
    return {(sid, int(level)): str(hint) for sid, level, hint in rows.iter_rows()}


def model_hints(request: HintRequest, collapsed: Collapsed) -> dict[tuple[str, int], str]:
    """Hints written by the request's hint model for the collapsed prompts."""
    from curate.backends.registry import open_backend
    from curate.hinting.writer import write_hints

    m = collapsed.manifest
    backend_name = request.hint_backend or str(m.get("backend") or "vllm")
    options = dict(request.hint_options)
    if request.hint_backend is None:
        options = {**(m.get("engine_options") or {}), **options}
    assert request.hint_model is not None
    with open_backend(
        backend_name, request.hint_model, options, seed=int(m.get("seed") or 0)
    ) as backend:
        written = write_hints(backend, collapsed.problems(), seed=int(m.get("seed") or 0))
    return written.hints


def eval_options(request: HintRequest, plan: HintPlan) -> Any:
    """The hinted run's EvalOptions: the run's model, backend, sampling, seed, grader
    and reference reading, over the hinted data."""
    from curate.evaluation.options import EvalOptions

    m = plan.manifest
    sampling = m.get("sampling") or {}
    extract = m.get("reference_extract")
    extract_mode = extract.get("mode") if isinstance(extract, dict) else None
    score_range = m.get("score_range")
    return EvalOptions(
        data=request.hinted_dir / DATA_FILE,
        model=str(m["model"]),
        backend=str(m.get("backend") or "vllm"),
        runs=request.group_size or plan.runs,
        out=request.hinted_dir,
        grader=m.get("grader"),
        temperature=float(sampling.get("temperature", 1.0)),
        top_p=float(sampling.get("top_p", 1.0)),
        max_tokens=int(sampling.get("max_tokens", 256)),
        stop=tuple(sampling.get("stop") or ()),
        seed=int(m.get("seed") or 0),
        mode=m.get("mode"),
        system=m.get("system"),
        layout="none",
        prompt_field=m["prompt_field"],
        answer_field=m["answer_field"],
        id_field="hint_id",
        engine_options={**(m.get("engine_options") or {}), **request.engine_options},
        reference_extract=str(extract_mode or "auto"),
        grader_timeout=float(m.get("grader_timeout_s") or 10.0),
        score_range=tuple(score_range) if score_range else None,
        truncation=str(m.get("truncation") or "grade"),
        engine_log=request.engine_log,
    )


def write_data(request: HintRequest, plan: HintPlan) -> Path | None:
    """Write the hinted data file (atomically); returns the outermost directory this
    call created (None: none), so that a refusal before any rollout can remove it.
    A hinted run made for other hints (RUN was run again since) is refused: its
    rollouts would not be these prompts'."""
    import io

    from curate.store.atomic import atomic_path

    target = request.hinted_dir / DATA_FILE
    buffer = io.BytesIO()
    plan.rows.write_ndjson(buffer)
    body = buffer.getvalue()
    if target.is_file():
        if target.read_bytes() == body:
            return None
        raise UsageError(
            f"{request.hinted_dir}: this hinted run holds other hints than the run's "
            "collapsed prompts get now (was the run made again?); remove it to start over"
        )
    created = None
    for parent in (request.hinted_dir.parent, request.hinted_dir):
        if not parent.exists():
            created = created or parent
    request.hinted_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        tmp.write_bytes(body)
    return created


def hint_run(
    request: HintRequest,
    progress: Progress | None = None,
    *,
    announce: Callable[[Preflight], None] | None = None,
    status: Status | None = None,
) -> HintOutcome:
    """Plan the hints, roll them out (resuming a hinted run already there) and
    summarize the hinted run."""
    from curate.evaluation.evaluate import evaluate

    collapsed = read_collapsed(request)
    hints = None
    if request.hint_model is not None:
        hints = stored_hints(request)
        if hints is None:
            if status is not None:
                status(f"writing hints with {request.hint_model}")
            hints = model_hints(request, collapsed)
    plan = plan_hints(request, collapsed, hints)
    created = write_data(request, plan)
    try:
        outcome = evaluate(eval_options(request, plan), progress, announce=announce, status=status)
    except CurateError:
        # Refused before it drew anything: leave no hinted run behind. One that stored
        # rollouts stays, and the same command resumes it.
        if created is not None and not RolloutStore(request.hinted_dir).shard_paths():
            shutil.rmtree(created, ignore_errors=True)
        raise
    return HintOutcome(
        request=request, plan=plan, evaluation=outcome, summary=read_summary(request, plan)
    )


def read_summary(request: HintRequest, plan: HintPlan) -> HintSummary:
    """The hinted run's per-level figures, from what it stores."""
    store = RolloutStore(request.hinted_dir)
    rollouts = store.rollouts(["sample_id", "rollout_idx", "score", "error"]).rename(
        {"sample_id": "hint_id"}
    )
    return summarize(
        rollouts,
        plan.hints,
        plan.collapsed,
        request.group_size or plan.runs,
        request.band,
    )


def outcome_json(outcome: HintOutcome) -> dict[str, Any]:
    """`curate hint --json`: the hinted run, its levels and each prompt's recommendation
    (keys in docs/reference/json.md)."""
    s = outcome.summary
    return {
        "run": str(outcome.request.run_dir),
        "hinted_run": str(outcome.hinted_dir),
        "stratum": outcome.request.stratum,
        "group_size": s.group_size,
        "band": list(s.band),
        "collapsed": s.collapsed,
        "without_hint": len(outcome.plan.without_hint),
        "rescued_any": s.rescued_any,
        "in_band": s.in_band,
        "levels": [level.as_dict() for level in s.levels],
        "recommended": [
            {"sample_id": sid, "level": level} for sid, level in sorted(s.recommended.items())
        ],
    }


def outcome_lines(outcome: HintOutcome) -> list[str]:
    """The terminal summary: one line per level, then the totals."""
    s = outcome.summary
    stratum = outcome.request.stratum
    lines = [
        f"{outcome.request.run_dir}: {s.collapsed} always-{stratum} prompts, "
        f"{len(outcome.plan.without_hint)} without a hint; hinted run in {outcome.hinted_dir} "
        f"(G = {s.group_size})"
    ]
    for level in s.levels:
        rate = "-" if level.pass_rate is None else f"{level.pass_rate:.3f}"
        mixed = "-" if level.mixed_share is None else f"{level.mixed_share:.1%}"
        rescued = "-" if level.rescued_share is None else f"{level.rescued_share:.1%}"
        errors = f", {level.errors} errors" if level.errors else ""
        lines.append(
            f"  level {level.level}: {level.prompts} prompts, {level.rollouts} rollouts{errors}; "
            f"pass rate {rate}; mixed at G {mixed}; rescued {rescued} of the collapsed"
        )
    low, high = s.band
    lines.append(
        f"rescued at some level: {s.rescued_any} of {s.collapsed}; a level with pass rate "
        f"in [{low:g}, {high:g}]: {s.in_band} of {s.collapsed} (the weakest such level is "
        "recommended: --format json lists them)"
    )
    return lines
