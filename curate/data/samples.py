"""Evaluation inputs: read a data set, find its fields, give every sample a stable id,
and turn each row into a prompt (text, a template over fields, or a chat message list)."""

from __future__ import annotations

import hashlib
import json
import os
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.prompts import Message, Mode, Prompt
from curate.data.layouts import Columns, get_layout, pick
from curate.data.sources import read_source, source_sha256
from curate.errors import InputError, UsageError

if TYPE_CHECKING:
    import polars as pl

    from curate.data.layouts.base import Layout
    from curate.store.manifest import RunManifest

# Common column names, most specific first.
PROMPT_FIELDS = ("prompt", "question", "problem", "input", "query", "instruction")
MESSAGE_FIELDS = ("messages", "prompt", "conversation")
ANSWER_FIELDS = ("answer", "ground_truth", "solution", "target", "reference", "label")
ID_FIELDS = ("sample_id", "id", "uid", "uuid")
# Answers nested in a struct column, as `struct.field`: verl's RL data keeps the
# reference in `reward_model.ground_truth`. Tried after the top-level names.
NESTED_ANSWER_FIELDS = ("reward_model.ground_truth",)


@dataclass(frozen=True)
class FieldMap:
    """Which columns hold the prompt, the reference answer and the id."""

    prompt_field: str | None  # text prompt column (None when a template or messages are used)
    messages_field: str | None  # chat message-list column
    answer_field: str  # a column, or `struct.field` for an answer nested in a struct column
    id_field: str | None  # None -> content-hash ids (may be `struct.field`)
    template: str | None = None
    # The catalogue layout recognised or named (curate/data/layouts/): it renders the
    # prompt when the prompt field is its own, and reads the reference when the answer
    # field is its own; None: the fields are used as they are.
    layout: str | None = None


def fields_of_manifest(manifest: RunManifest, where: object = None) -> FieldMap:
    """The fields a run's manifest records `curate eval` read its samples with (to build
    the same prompts and references again from the run's samples.parquet)."""
    if manifest.answer_field is None:
        raise InputError("names no answer_field: cannot read the references", path=where)
    return FieldMap(
        prompt_field=manifest.prompt_field,
        messages_field=manifest.messages_field,
        answer_field=manifest.answer_field,
        id_field=manifest.id_field,
        template=manifest.template,
        layout=manifest.layout,
    )


def load_dataset(
    path: str | os.PathLike[str], *, limit: int | None = None, split: str | None = None
) -> pl.DataFrame:
    """The input rows with their original fields (first `limit` rows when given).

    `path` is a JSONL, Parquet or CSV file, a Hugging Face dataset saved with
    `save_to_disk` (`split` picks one split of a DatasetDict), or a directory of
    Parquet shards.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", path=path)
    frame = read_source(path, split=split)
    if frame.height == 0:
        raise InputError("data set is empty", path=path)
    return frame.head(limit) if limit is not None else frame


def file_sha256(path: str | os.PathLike[str], *, split: str | None = None) -> str:
    """SHA-256 of the data set: a file's bytes, or a dataset directory's data files."""
    return source_sha256(path, split=split)


def has_field(frame: pl.DataFrame, name: str) -> bool:
    """Whether `name` is a column, or `struct.field` of a struct column."""
    import polars as pl

    if name in frame.columns:
        return True
    head, _, rest = name.partition(".")
    if not rest or head not in frame.columns:
        return False
    dtype = frame.schema[head]
    return isinstance(dtype, pl.Struct) and rest in {f.name for f in dtype.fields}


def field_values(frame: pl.DataFrame, name: str) -> pl.Series:
    """The values of column `name`, or of `struct.field` inside a struct column."""
    if name in frame.columns:
        return frame[name]
    head, _, rest = name.partition(".")
    return frame[head].struct.field(rest).alias(name)


def answer_values(frame: pl.DataFrame, fields: FieldMap) -> list[Any]:
    """The reference answer of every row, in row order (as the layout reads it)."""
    layout = _layout_parts(frame, fields)[1]
    if layout is None:
        return field_values(frame, fields.answer_field).to_list()
    return [layout.reference(row, fields.answer_field) for row in _plain_rows(frame)]


def _plain_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: _to_python(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def _layout_parts(frame: pl.DataFrame, fields: FieldMap) -> tuple[Layout | None, Layout | None]:
    """(the layout when it renders the prompt, the layout when it reads the reference):
    each only when the field used is the layout's own (a field the user names instead
    is used as it is)."""
    if fields.layout is None:
        return None, None

    layout = get_layout(fields.layout)
    cols = Columns.of(frame)
    prompt = (
        fields.template is None
        and fields.prompt_field is not None
        and fields.prompt_field == layout.prompt_field(cols)
        and fields.messages_field is None
    )
    reference = fields.answer_field == layout.answer_field(cols)
    return (layout if prompt else None), (layout if reference else None)


def _is_message_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)
    )


def resolve_fields(
    frame: pl.DataFrame,
    *,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    template: str | None = None,
    source: object = None,
    answer_names: Sequence[str] = ANSWER_FIELDS,
    layout: str | None = None,
) -> FieldMap:
    """Pick the prompt, answer and id columns: given names win, then the layout's
    (`layout`: "auto" detects one from the fields, a name forces it, None or "none"
    uses none), else common names (`answer_names` for the answer: a grader may look
    for its own columns first)."""

    cols = frame.columns
    chosen = pick(frame, layout, source=source)
    messages_field = None
    if chosen is not None:
        view = Columns.of(frame)
        if template is None and prompt_field is None:
            prompt_field = chosen.prompt_field(view)
            messages_field = chosen.messages_field(view)
        answer_field = answer_field or chosen.answer_field(view)
        id_field = (
            id_field or chosen.id_field(view) or next((c for c in ID_FIELDS if c in cols), None)
        )

    def need(name: str, what: str, *, nested: bool = False) -> str:
        # Only the answer may sit inside a struct (`reward_model.ground_truth`).
        if not (has_field(frame, name) if nested else name in cols):
            raise InputError(f"no {what} column '{name}' (have: {', '.join(cols)})", path=source)
        return name

    if messages_field is not None:
        pass  # the layout's chat messages
    elif template is not None:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
        missing = sorted({f.split(".")[0].split("[")[0] for f in fields} - set(cols))
        if missing:
            raise InputError(
                f"--template uses missing field(s) {', '.join(missing)} (have: {', '.join(cols)})",
                path=source,
            )
        prompt_field = None
    elif prompt_field is not None:
        need(prompt_field, "prompt")
        if _is_message_list(_first(frame, prompt_field)):
            messages_field, prompt_field = prompt_field, None
    else:
        for name in MESSAGE_FIELDS:
            if name in cols and _is_message_list(_first(frame, name)):
                messages_field = name
                break
        if messages_field is None:
            prompt_field = next((c for c in PROMPT_FIELDS if c in cols), None)
            if prompt_field is None:
                raise InputError(
                    "no prompt column found (looked for "
                    f"{', '.join((*PROMPT_FIELDS, 'messages'))}); name one with --prompt-field "
                    "or give --template",
                    path=source,
                )
            if _is_message_list(_first(frame, prompt_field)):
                # OpenRLHF's `input` may hold chat messages: chat turns, never one string.
                messages_field, prompt_field = prompt_field, None
    if answer_field is not None:
        need(answer_field, "answer", nested=True)
    else:
        answer_field = next((c for c in answer_names if c in cols), None)
        if answer_field is None:
            answer_field = next((c for c in NESTED_ANSWER_FIELDS if has_field(frame, c)), None)
        if answer_field is None:
            raise InputError(
                "no answer column found (looked for "
                f"{', '.join((*answer_names, *NESTED_ANSWER_FIELDS))}); "
                "name one with --answer-field",
                path=source,
            )
    if id_field is not None:
        need(id_field, "id", nested=True)
    else:
        id_field = next((c for c in ID_FIELDS if c in cols), None)
    return FieldMap(
        prompt_field=prompt_field,
        messages_field=messages_field,
        answer_field=answer_field,
        id_field=id_field,
        template=template,
        layout=chosen.name if chosen is not None else None,
    )


def _first(frame: pl.DataFrame, column: str) -> Any:
    """The first value of `column` as plain Python (None for an empty frame)."""
    return _to_python(frame[column][0]) if frame.height else None


def _to_python(value: Any) -> Any:
    """polars hands back lists of structs as Series/dicts; make them plain Python."""
    if hasattr(value, "to_list"):
        return value.to_list()
    return value


def assign_ids(frame: pl.DataFrame, fields: FieldMap, *, source: object = None) -> pl.DataFrame:
    """Add `sample_id`: from the id field, or a hash of the row's content.

    Content-hash ids survive reordering, inserting and deleting rows; identical
    rows get `-2`, `-3`... in file order.
    """
    import polars as pl

    if fields.id_field is not None:
        ids = field_values(frame, fields.id_field).cast(pl.String)
        if ids.null_count():
            raise InputError(f"id field '{fields.id_field}' has missing values", path=source)
        dup = ids.filter(ids.is_duplicated())
        if dup.len():
            raise InputError(
                f"id field '{fields.id_field}' has duplicate value {dup[0]!r}", path=source
            )
        return frame.with_columns(ids.alias("sample_id"))
    hashes = []
    seen: dict[str, int] = {}
    for row in frame.iter_rows(named=True):
        text = json.dumps(row, sort_keys=True, default=str, ensure_ascii=False)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        seen[digest] = seen.get(digest, 0) + 1
        hashes.append(digest if seen[digest] == 1 else f"{digest}-{seen[digest]}")
    return frame.with_columns(pl.Series("sample_id", hashes, dtype=pl.String))


def load_samples(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    split: str | None = None,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    template: str | None = None,
    answer_names: Sequence[str] = ANSWER_FIELDS,
    layout: str | None = None,
) -> tuple[pl.DataFrame, FieldMap]:
    """`load_dataset`, its fields resolved, and a `sample_id` on every row."""
    frame = load_dataset(path, limit=limit, split=split)
    fields = resolve_fields(
        frame,
        prompt_field=prompt_field,
        answer_field=answer_field,
        id_field=id_field,
        template=template,
        source=path,
        answer_names=answer_names,
        layout=layout,
    )
    return assign_ids(frame, fields, source=path), fields


def prompts_by_id(
    frame: pl.DataFrame,
    fields: FieldMap,
    mode: Mode,
    *,
    system: str | None = None,
    source: object = None,
) -> dict[str, Prompt]:
    """`build_prompts` keyed by sample_id (of a frame from `load_samples`)."""
    prompts = build_prompts(frame, fields, mode, system=system, source=source)
    return dict(zip(frame["sample_id"].to_list(), prompts, strict=True))


def references_by_id(frame: pl.DataFrame, fields: FieldMap) -> dict[str, Any]:
    """The reference answer keyed by sample_id (of a frame from `load_samples`)."""
    return dict(zip(frame["sample_id"].to_list(), answer_values(frame, fields), strict=True))


def build_prompts(
    frame: pl.DataFrame,
    fields: FieldMap,
    mode: Mode,
    *,
    system: str | None = None,
    source: object = None,
) -> list[Prompt]:
    """One prompt per row: a string (completion mode) or a message list (chat mode)."""
    prompts: list[Prompt] = []
    layout = _layout_parts(frame, fields)[0]
    for row in frame.iter_rows(named=True):
        if fields.messages_field is not None:
            messages = [dict(m) for m in _to_python(row[fields.messages_field])]
            if mode == "completion":
                raise UsageError(
                    f"{source}: completion mode needs a text prompt, but '{fields.messages_field}' "
                    "holds chat messages (use --mode chat or --prompt-field/--template)"
                )
            if system and not any(m.get("role") == "system" for m in messages):
                messages.insert(0, {"role": "system", "content": system})
            prompts.append(messages)
            continue
        if fields.template is not None:
            text = fill_template(fields.template, row, source=source)
        elif layout is not None:
            rendered = layout.text({k: _to_python(v) for k, v in row.items()})
            assert fields.prompt_field is not None  # the layout renders only its own field
            text = rendered if rendered is not None else str(row[fields.prompt_field])
        else:
            assert fields.prompt_field is not None
            value = row[fields.prompt_field]
            if value is None:
                raise InputError(
                    f"prompt field '{fields.prompt_field}' is empty in sample "
                    f"{row.get('sample_id')!r}",
                    path=source,
                )
            text = str(value)
        if mode == "chat":
            msgs: list[Message] = []
            if system:
                msgs.append({"role": "system", "content": system})
            msgs.append({"role": "user", "content": text})
            prompts.append(msgs)
        else:
            prompts.append(f"{system}\n\n{text}" if system else text)
    return prompts


def fill_template(template: str, row: dict[str, Any], *, source: object = None) -> str:
    """`template` filled from a row: `{field}`, `{struct.field}` and `{list[0]}` (the
    dotted access --answer-field allows), or a one-line InputError."""
    try:
        return template.format_map(_Dotted({k: _to_python(v) for k, v in row.items()}))
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
        what = f"no field {exc}" if isinstance(exc, KeyError | AttributeError) else str(exc)
        raise InputError(f"--template could not be filled: {what}", path=source) from None


def _dotted(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, _Dotted):
        return _Dotted(value)
    if isinstance(value, list) and not isinstance(value, _DottedList):
        return _DottedList(value)
    return value


class _Dotted(dict[str, Any]):
    """A row (or struct value) whose fields read as `{a.b}` as well as `{a[b]}`."""

    def __getitem__(self, key: str) -> Any:
        return _dotted(dict.__getitem__(self, key))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(repr(name)) from None


class _DottedList(list[Any]):
    def __getitem__(self, index: Any) -> Any:
        return _dotted(list.__getitem__(self, index))
