"""From the kept rows to an `ExportBatch`: weights joined, prompts built the way
`curate eval` built them, answers as text."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from curate.core.prompts import Mode
from curate.data.samples import FieldMap, answer_values, build_prompts, resolve_fields
from curate.errors import InputError, UsageError
from curate.exports.base import (
    DEFAULT_DATA_SOURCE,
    DEFAULT_WEIGHT_COLUMN,
    TRAINER_STATS,
    ExportBatch,
    answer_text,
)
from curate.exports.columns import Role
from curate.exports.kind import DEFAULT_ABILITY, Kind, ability_for, task_kind
from curate.stats.columns import STAT_COLUMNS, WEIGHT_COLUMN
from curate.store.manifest import RunManifest

WEIGHTS_ID = "sample_id"
WEIGHTS_VALUE = WEIGHT_COLUMN


def export_fields(
    samples: pl.DataFrame,
    *,
    manifest: RunManifest | None = None,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    template: str | None = None,
    source: object = None,
) -> FieldMap:
    """The prompt and answer fields: given names win, then the run's manifest (what
    `curate eval` used), then the same defaults `curate eval` applies."""
    m = manifest or RunManifest()
    if template is None and prompt_field is None:
        template = m.template
        if template is None:
            prompt_field = m.messages_field or m.prompt_field
    answer_field = answer_field or m.answer_field
    # The layout `curate eval` read the data with renders the same prompts (multiple
    # choice options) and references (index -> letter); a run made before layouts
    # existed has none; samples without a run are recognised as eval would.
    layout = m.layout if manifest is not None else "auto"
    return resolve_fields(
        samples,
        prompt_field=prompt_field,
        answer_field=answer_field,
        template=template,
        id_field="sample_id" if "sample_id" in samples.columns else None,
        source=source,
        layout=layout,
    )


def default_data_source(
    manifest: Mapping[str, Any] | None, data: str | os.PathLike[str] | None
) -> str:
    """The kind of task the run graded (`curate.exports.kind`: code, math,
    multiple_choice); when the run does not tell, the data set's name: the file
    `curate eval` read, else --data, else "curate"."""
    kind = task_kind(manifest)
    if kind is not None:
        return kind
    path = (manifest or {}).get("dataset_path") or data
    if not path:
        return DEFAULT_DATA_SOURCE
    return Path(str(path).rstrip("/")).stem or DEFAULT_DATA_SOURCE


def default_ability(manifest: Mapping[str, Any] | None) -> str:
    """verl's `ability` for the run's kind of task (`DEFAULT_ABILITY` when unknown)."""
    return ability_for(task_kind(manifest))


def input_roles(
    columns: Sequence[str],
    fields: FieldMap | None,
    *,
    data_source_named: bool,
    ability_named: bool,
) -> dict[str, Role]:
    """Input column -> the role it played in the run (`curate.exports.columns`)."""
    roles: dict[str, Role] = {}
    present = set(columns)
    if fields is not None:
        if fields.messages_field and fields.messages_field in present:
            roles[fields.messages_field] = "messages"
        elif fields.template is None and fields.prompt_field and fields.prompt_field in present:
            roles[fields.prompt_field] = "prompt_text"
        answer = fields.answer_field
        if answer and answer in present:
            roles[answer] = "answer"
    if "data_source" in present and not data_source_named:
        roles["data_source"] = "data_source"
    if "ability" in present and not ability_named:
        roles["ability"] = "ability"
    for column in ("reward_model", "extra_info"):
        if column in present:
            roles.setdefault(column, "verl")
    return roles


def require_weight_columns(weights: pl.DataFrame, *, source: object = None) -> None:
    """InputError naming `source` unless `weights` has columns sample_id and weight."""
    missing = [c for c in (WEIGHTS_ID, WEIGHTS_VALUE) if c not in weights.columns]
    if missing:
        raise InputError(
            f"weights need columns {WEIGHTS_ID} and {WEIGHTS_VALUE} "
            f"(missing {', '.join(missing)}; have: {', '.join(weights.columns)})",
            path=source,
        )


def join_weights(
    rows: pl.DataFrame,
    weights: pl.DataFrame | None,
    *,
    column: str = DEFAULT_WEIGHT_COLUMN,
    source: object = None,
) -> pl.DataFrame:
    """`rows` plus the per-sample weight (null where `weights` has no row) as `column`.

    `weights` has columns `sample_id` and `weight`: the hook through which computed
    sample weights reach every export.
    """
    if weights is None:
        return rows
    require_weight_columns(weights, source=source)
    if column in rows.columns:
        raise UsageError(
            f"the samples already have a column '{column}'; name the weight column "
            "another way with --weight-column"
        )
    try:
        frame = weights.select(
            pl.col(WEIGHTS_ID).cast(pl.String), pl.col(WEIGHTS_VALUE).cast(pl.Float64)
        )
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"weights must be numbers: {exc}", path=source) from exc
    dup = frame[WEIGHTS_ID].filter(frame[WEIGHTS_ID].is_duplicated())
    if dup.len():
        raise InputError(f"weights give sample {dup[0]!r} more than once", path=source)
    return rows.join(
        frame.rename({WEIGHTS_VALUE: column}), on=WEIGHTS_ID, how="left", maintain_order="left"
    )


def prepare_batch(
    rows: pl.DataFrame,
    *,
    fields: FieldMap | None = None,
    mode: Mode = "chat",
    system: str | None = None,
    data_source: str | None = None,
    default_source: str = DEFAULT_DATA_SOURCE,
    stats: bool = True,
    weights: pl.DataFrame | None = None,
    weight_column: str = DEFAULT_WEIGHT_COLUMN,
    source: object = None,
    input_columns: Sequence[str] | None = None,
    ability: str | None = None,
    default_ability: str = DEFAULT_ABILITY,
    kind: Kind | None = None,
) -> ExportBatch:
    """Everything the writers need from the kept rows.

    `rows` are the kept samples (original fields and statistics, with `sample_id`).
    Without `fields` there are no prompts, and only the generic formats can be
    written. `data_source` given wins; else a `data_source` column of the input;
    else `default_source`; `ability` likewise (given, an `ability` column, then
    `default_ability`); `kind` is the run's kind of task. `input_columns` are the
    columns of `rows` that came from the input samples, which every format carries
    (default: all but `sample_id` and the statistics). `stats=False` leaves every
    statistics column out.
    """
    if input_columns is None:
        input_columns = [c for c in rows.columns if c not in STAT_COLUMNS]

    rows = join_weights(rows, weights, column=weight_column, source=source)
    if not stats:
        rows = rows.drop([c for c in STAT_COLUMNS if c in rows.columns])
    sample_ids = rows["sample_id"].cast(pl.String).to_list()
    chat_prompts = text_prompts = answers = None
    if fields is not None:
        chat_prompts = build_prompts(rows, fields, "chat", system=system, source=source)
        if mode == "completion":
            text_prompts = build_prompts(rows, fields, "completion", system=system, source=source)
        answers = [answer_text(v) for v in answer_values(rows, fields)]
    row_sources = None
    if data_source is None and "data_source" in rows.columns:
        row_sources = [
            str(v) if v is not None else default_source for v in rows["data_source"].to_list()
        ]
    return ExportBatch(
        rows=rows,
        sample_ids=sample_ids,
        chat_prompts=chat_prompts,  # type: ignore[arg-type]
        text_prompts=text_prompts,  # type: ignore[arg-type]
        answers=answers,
        answer_field=fields.answer_field if fields is not None else None,
        mode=mode,
        data_source=data_source or default_source,
        row_data_sources=row_sources,
        stat_columns=TRAINER_STATS if stats else (),
        weight_column=weight_column if weights is not None else None,
        input_columns=tuple(c for c in input_columns if c != "sample_id"),
        input_roles=input_roles(
            list(input_columns),
            fields,
            data_source_named=data_source is not None,
            ability_named=ability is not None,
        ),
        ability=ability or default_ability,
        kind=kind,
    )
