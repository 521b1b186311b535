"""What `curate filter` asks for (`FilterRequest`), and the one check of it
(`check_request`) that turns the options as typed into the values the pipeline uses.

Every check here costs no reading of the scores: a bad name, range or combination of
options fails before a run is opened. What can only be known from the data (a bare
table without prompts for a trainer format, a weight table that misses a kept sample)
is checked where it is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from curate.analysis.suspects import NO_ANSWERS
from curate.core.outcome import DEFAULT_GROUP_SIZE, DEFAULT_THRESHOLD
from curate.errors import UsageError
from curate.exports import format_for_output, get_format
from curate.exports.base import ExportFormat
from curate.filtering import curriculum
from curate.filtering.select import FilterSpec, parse_range, parse_suspects, split_keep
from curate.filtering.weights import check_weight_default
from curate.stats.columns import DIFFICULTY_COLUMN, WEIGHT_COLUMN
from curate.stats.compare import DEFAULT_ALPHA
from curate.stats.weights import DEFAULT_DELTA, WEIGHT_KINDS, check_objective
from curate.store.scores import has_answers

PathArg = str | os.PathLike[str]
DIFFICULTY_MODES = ("column", "pools")


@dataclass(frozen=True)
class FilterRequest:
    """The options of one filter, as `curate filter` takes them.

    Keep the samples of `run` whose category is in `keep` (the names `--keep` takes)
    and whose pass rate is within `pass_rate` ("LO:HI" or (lo, hi); on an adaptive run
    the posterior mean, as the stopping rule biases raw rates); write them to `output`
    in `format` (default: from the suffix) and the rest to `rejects_path(output)`.

    `data` gives the original samples of a bare score table (`split`, `id_field` pick
    them out); `weights` is an objective (linear|log|sqrt|arcsin|std) or a table of
    sample_id, weight that must cover every kept sample, unless `weight_default` fills
    the ones it lacks; `plan` is a plan from `plan_rollouts`. `suspects` (keep, drop,
    only) drops the suspect labels (`curate.analysis.suspects`; drop_reason
    "suspect_label") or every other sample; it needs extracted answers.

    `against` names an earlier run of the same samples: `keep` may then also name the
    sets and transitions of `curate compare` from that run to `run` (learned, forgotten,
    newly-learnable, still-unreachable, incorrect-to-mixed, ...; significance at
    `alpha`), kept in addition to the categories `keep` names.

    `as_frequency` turns the weights into repetitions (`total` rows in all; the weight
    column is then left out, the count kept in `copies`). `difficulty` "column" adds an
    easy/medium/hard `difficulty` column from the pass rate (`difficulty_cuts` LO:HI);
    "pools" writes the three levels to OUT.easy, OUT.medium and OUT.hard instead of OUT.

    `data_source` and `ability` name verl's and OpenRLHF's fields, which otherwise come
    from the run's kind of task (`curate.exports.kind`); `prompt_field`, `answer_field`,
    `template` and `system` override how the run built its prompts. A filter that keeps
    no sample is a RunError and writes nothing, unless `allow_empty`.
    """

    run: PathArg
    output: PathArg
    keep: Sequence[str] = ("high-variance",)
    pass_rate: str | tuple[float, float] | None = None
    data: PathArg | None = None
    split: str | None = None
    id_field: str | None = None
    format: str | None = None
    stats: bool = True
    weights: PathArg | None = None
    weight_delta: float = DEFAULT_DELTA
    weight_default: float | None = None
    plan: PathArg | None = None
    weight_column: str = WEIGHT_COLUMN
    data_source: str | None = None
    ability: str | None = None
    allow_empty: bool = False
    prompt_field: str | None = None
    answer_field: str | None = None
    template: str | None = None
    system: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    group_size: int = DEFAULT_GROUP_SIZE
    suspects: str = "keep"
    against: PathArg | None = None
    alpha: float = DEFAULT_ALPHA
    as_frequency: bool = False
    total: int | None = None
    difficulty: str | None = None
    difficulty_cuts: str | tuple[float, float] | None = None
    difficulty_column: str = DIFFICULTY_COLUMN


@dataclass(frozen=True)
class CheckedRequest:
    """A `FilterRequest` after `check_request`: paths as paths, names resolved."""

    request: FilterRequest
    run: Path
    output: Path
    data: Path | None
    against: Path | None
    format: ExportFormat
    spec: FilterSpec
    cuts: tuple[float, float]
    # The files written for the kept samples, with the difficulty level each holds
    # (None: every kept sample, in OUT).
    outputs: list[tuple[Path, str | None]] = field(default_factory=list)
    objective: str | None = None  # --weights names an objective
    weights_path: Path | None = None  # --weights names a table
    plan_path: Path | None = None


def check_request(request: FilterRequest) -> CheckedRequest:
    """The request's values, checked together; a UsageError names the first bad one."""
    r = request
    if r.as_frequency and r.weights is None:
        raise UsageError("--as-frequency turns --weights into repetitions: give --weights too")
    if r.total is not None and not r.as_frequency:
        raise UsageError("--total sets the size of an --as-frequency export: add --as-frequency")
    if r.difficulty not in (None, *DIFFICULTY_MODES):
        raise UsageError(f"--difficulty {r.difficulty!r}: expected column or pools")
    cuts = curriculum.parse_cuts(r.difficulty_cuts)
    if r.difficulty_cuts is not None and r.difficulty is None:
        raise UsageError("--difficulty-cuts needs --difficulty column or pools")
    run, output = Path(r.run), Path(r.output)
    fmt = get_format(r.format) if r.format is not None else format_for_output(output)
    fmt.check_output(output)
    pass_rate = r.pass_rate
    if isinstance(pass_rate, str):
        pass_rate = parse_range(pass_rate) if pass_rate else None
    categories, compare = split_keep(list(r.keep), against=r.against is not None)
    spec = FilterSpec(
        keep=categories,
        pass_rate=pass_rate,
        suspects=parse_suspects(r.suspects),
        compare=compare,
    )
    if spec.suspects != "keep":
        _check_answers(run, spec.suspects)
    if r.split is not None and r.data is None:
        # A run directory keeps the samples it evaluated: only --data has splits to pick.
        raise UsageError("--split picks a split of --data; pass --data too")
    objective, weights_path = _weights_source(r)
    outputs: list[tuple[Path, str | None]] = [(output, None)]
    if r.difficulty == "pools":
        outputs = [
            (Path(curriculum.pool_path(str(output), level)), level)
            for level in curriculum.DIFFICULTY_LEVELS
        ]
        for path, _ in outputs:
            fmt.check_output(path)
    return CheckedRequest(
        request=r,
        run=run,
        output=output,
        data=Path(r.data) if r.data is not None else None,
        against=Path(r.against) if r.against is not None else None,
        format=fmt,
        spec=spec,
        cuts=cuts,
        outputs=outputs,
        objective=objective,
        weights_path=weights_path,
        plan_path=Path(r.plan) if r.plan is not None else None,
    )


def _weights_source(r: FilterRequest) -> tuple[str | None, Path | None]:
    """--weights as (objective, None) or (None, table path); (None, None) without it."""
    name = str(r.weights) if r.weights is not None else None
    objective = name if name in WEIGHT_KINDS and not Path(name).exists() else None
    if objective is not None:
        check_objective(objective, r.weight_delta)
    path = Path(r.weights) if r.weights is not None and objective is None else None
    if path is not None and not path.exists() and not path.suffix:
        # Not a file and not a table's name either: most likely a mistyped objective.
        raise UsageError(
            f"--weights '{r.weights}' is neither an objective ({', '.join(WEIGHT_KINDS)}) "
            "nor a weight table file"
        )
    check_weight_default(r.weight_default, table=path is not None, given=r.weights is not None)
    return objective, path


def _check_answers(run: Path, choice: str) -> None:
    """UsageError (before any reading of the scores) when the input has no extracted
    answers, which the suspect-label check needs."""
    if not has_answers(run):
        raise UsageError(f"--suspects {choice}: {NO_ANSWERS}")
